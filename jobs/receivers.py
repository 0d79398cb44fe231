"""What jobs do when something below them changes (accounts send, jobs listen)."""

from __future__ import annotations

from django.db import transaction
from django.dispatch import receiver

from accounts.signals import account_deactivated
from jobs import protocol
from jobs.live.events import close_user_sockets
from jobs.models import Job, JobState

DEACTIVATED_MESSAGE = "The account was deactivated before the job reached Slurm."


@receiver(account_deactivated)
def stop_jobs_of_deactivated_account(sender, user_id: int, **kwargs):
    """Fail what has not reached Slurm (a worker holding one now sees the new state and
    cancels what it submitted); the cluster-account lock cancels what Slurm has."""
    waiting = Job.objects.filter(owner_id=user_id, state=JobState.SUBMITTING).values_list("pk", flat=True)
    for job_pk in list(waiting):
        protocol.fail_submission(job_pk, DEACTIVATED_MESSAGE)
    transaction.on_commit(lambda: close_user_sockets(user_id))
