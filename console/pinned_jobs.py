"""Short operational jobs pinned to one node (GPU diagnostics, GPU resets), submitted as the
person who asked and recorded as their portal jobs so the mirror follows them."""

from __future__ import annotations

from django.conf import settings

from cluster.services import rest_client
from cluster.types import JobSubmission
from jobs.actions import make_user_directory
from jobs.models import Job, JobState


def submit_pinned_job(
    user, *, name: str, directory_name: str, script: str, node: str, tres_per_node: str, minutes: int, reservation=""
) -> Job:
    """Raises SlurmError when Slurm refuses; records nothing then."""
    profile = user.profile
    directory = make_user_directory(profile.cluster_username, directory_name, profile.cluster_uid, profile.cluster_gid)
    submission = JobSubmission(
        name=name,
        script=script,
        working_directory=str(directory),
        standard_output=f"{directory}/stdout.log",
        standard_error=f"{directory}/stdout.log",
        partition=settings.SLURM_PARTITION,
        account=settings.SLURM_ACCOUNT,
        time_limit_minutes=minutes,
        tres_per_node=tres_per_node,
        required_nodes=(node,),
        reservation=reservation,
        requeue=False,
    )
    slurm_job_id = rest_client(profile.cluster_username).submit_job(submission)
    return Job.objects.create(
        owner=user,
        slurm_job_id=slurm_job_id,
        cluster_user=profile.cluster_username,
        name=name,
        state=JobState.PENDING,
        tres_per_node=tres_per_node,
        standard_output=submission.standard_output,
        standard_error=submission.standard_error,
    )
