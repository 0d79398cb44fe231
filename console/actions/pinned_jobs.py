"""Short operational jobs pinned to one node (GPU diagnostics, GPU resets), submitted as the
person who asked. They are portal jobs like any other: a SUBMITTING row first, then the
same claim-and-comment submission (jobs/tasks.py), so the mirror can attach them but never
record them twice."""

from __future__ import annotations

from cluster.errors import SlurmError, SlurmRequestError
from jobs import actions, protocol
from jobs.models import Job, JobState
from jobs.tasks import submit_claimed


def submit_pinned_job(
    user, *, name: str, script: str, node: str, tres_per_node: str, minutes: int, reservation=""
) -> Job:
    """Submits now. Raises SlurmError when Slurm refuses or cannot be reached; the row then
    records why (SUBMIT_FAILED), since the callers handle the failure themselves rather than
    wait for retries."""
    job = actions.create_pinned_job(
        user, name=name, script=script, node=node, tres_per_node=tres_per_node, minutes=minutes, reservation=reservation
    )
    try:
        submit_claimed(job.pk)
    except SlurmError as exc:  # transient: give up here, the caller reports it
        protocol.fail_submission(job.pk, f"Slurm could not take the job: {exc.public_message}", detail=exc.message)
        raise
    job.refresh_from_db()
    if job.state == JobState.SUBMIT_FAILED:
        raise SlurmRequestError(job.error_detail or job.error, public_message=job.error)
    return job
