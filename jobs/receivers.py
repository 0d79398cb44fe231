"""What jobs do when something changes: below them (accounts send, jobs listen), or a job ended."""

from __future__ import annotations

from django.conf import settings
from django.db import transaction
from django.dispatch import receiver

from accounts.signals import account_deactivated, plan_changed
from jobs import left_plan, protocol
from jobs.live.events import close_user_sockets
from jobs.models import FINAL_STATES, Job, JobState
from jobs.signals import job_changed
from jobs.tasks import follow_dataset_staging, record_container_start

DEACTIVATED_MESSAGE = "The account was deactivated before the job reached Slurm."


@receiver(account_deactivated)
def stop_jobs_of_deactivated_account(sender, user_id: int, **kwargs):
    """Fail what has not reached Slurm (a worker holding one now sees the new state and
    cancels what it submitted); the cluster-account lock cancels what Slurm has."""
    waiting = Job.objects.filter(owner_id=user_id, state=JobState.SUBMITTING).values_list("pk", flat=True)
    for job_pk in list(waiting):
        protocol.fail_submission(job_pk, DEACTIVATED_MESSAGE)
    transaction.on_commit(lambda: close_user_sockets(user_id))


@receiver(plan_changed)
def end_work_of_a_left_plan(sender, user_id: int, before, after, status, **kwargs):
    """Leaving a plan for a lesser one cancels the work still waiting under it (jobs/left_plan.py)."""
    left_plan.on_plan_change(user_id, before, after, status)


@receiver(job_changed)
def time_container_start(sender, job, **kwargs):
    """Once a portal job with an image has ended, read how long its container took to start."""
    if job.image and job.spec and job.state in FINAL_STATES and settings.JOB_RUNTIME == "pyxis":
        record_container_start.delay(job.pk)


@receiver(job_changed)
def follow_datasets(sender, job, **kwargs):
    """A job with datasets (a user's, or an admin's pin: jobs/actions.py) that starts (or
    ends): read how its data reached its node."""
    mounts = job.spec.get("datasets") or job.pinned.get("datasets")
    if mounts and (job.state == JobState.RUNNING or job.state in FINAL_STATES):
        follow_dataset_staging.delay(job.pk)
