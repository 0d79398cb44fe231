"""How a portal job and a Slurm job are tied together, for every writer below the actions
(the submitting task, the mirror): the comment that names the portal job, the job's
directory, and the conditional UPDATEs that attach a Slurm id or fail a submission."""

from __future__ import annotations

import uuid

from django.db import transaction

from cluster.clusters.services import job_paths
from cluster.files import jobfs
from jobs.live.events import publish_job, publish_job_update
from jobs.models import Job, JobState

COMMENT_PREFIX = "gpupool:"


def slurm_comment(job: Job) -> str:
    return f"{COMMENT_PREFIX}{job.uuid}"


def portal_uuid_of(comment: str) -> uuid.UUID | None:
    """The portal job id a Slurm job's comment names ("gpupool:<uuid>"); None for any other comment.
    Anyone can write any comment: what it names is checked by the caller."""
    if not comment.startswith(COMMENT_PREFIX):
        return None
    try:
        return uuid.UUID(comment[len(COMMENT_PREFIX) :])
    except ValueError:
        return None


def job_directory(job: Job):
    """Where Slurm writes this job's files: <job root>/<cluster user>/<job uuid>."""
    return job_paths(job.cluster).job_dir(job.cluster_user) / str(job.uuid)


def log_paths(job: Job) -> tuple[str, str]:
    """Where Slurm writes the job's standard output and error, as Slurm sees them: an operational job
    (pinned) writes both to one file."""
    directory = job_directory(job)
    return f"{directory}/stdout.log", f"{directory}/{'stdout' if job.pinned else 'stderr'}.log"


def make_user_directory(cluster_user: str, name: str, uid: int | None, gid: int | None, cluster: str | None = None):
    """<job root>/<cluster user>/<name>, created and owned by that user, before Slurm opens
    the logs in it. Returns the path as Slurm sees it. Raises OSError (jobfs.UnsafePath)
    when either directory is a symlink, not a directory, or another user's: the user's
    own jobs can write in the job root and plant one there."""
    paths = job_paths(cluster)
    directory = paths.job_dir(cluster_user) / name
    jobfs.make_owned_directory(paths.user_directory(cluster_user, name), uid=uid, gid=gid)
    return directory


def prepare_job_directory(job: Job, uid: int | None, gid: int | None) -> None:
    make_user_directory(job.cluster_user, str(job.uuid), uid, gid, job.cluster)


def attach_slurm_job(job_pk: int, slurm_job_id: int, *, job: Job | None = None) -> bool:
    """Record that Slurm accepted the submission. Conditional on the row still waiting, so a
    worker and the mirror attaching the same job do it once. `job`: the caller's instance of
    the row, brought up to date when the attach happens (and pushed as it is, not re-read)."""
    attached = {
        "slurm_job_id": slurm_job_id,
        "state": JobState.PENDING,
        "slurm_states": "",
        "error": "",
        "error_detail": "",
    }
    if job is not None and not job.standard_output:
        # Known from the submission: a job that ends before the mirror ever lists it has its logs and
        # files all the same (the mirror's copy of Slurm's StdOut says the same later).
        attached["standard_output"], attached["standard_error"] = log_paths(job)
    updated = Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING, slurm_job_id__isnull=True).update(**attached)
    if updated and job is not None:
        for name, value in attached.items():
            setattr(job, name, value)
        transaction.on_commit(lambda: publish_job(job))
    elif updated:
        transaction.on_commit(lambda: publish_job_update(job_pk))
    return bool(updated)


def fail_submission(job_pk: int, message: str, detail: str = "") -> bool:
    """`message` is shown to the owner; `detail` (paths, Slurm's internals) to admins only."""
    updated = Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING).update(
        state=JobState.SUBMIT_FAILED, error=message[:4000], error_detail=detail[:4000], submit_claimed_until=None
    )
    if updated:
        transaction.on_commit(lambda: publish_job_update(job_pk))
    return bool(updated)
