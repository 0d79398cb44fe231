"""Beat tasks: expiry of credit past its time, and a sweep that repairs missed grants."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.db.models import Q
from django.utils import timezone

from credits.actions import grants, ledger
from credits.models import CreditLot, Enrollment
from credits.tutorial import TUTORIAL_COMMAND
from jobs.models import Job, JobState

log = logging.getLogger(__name__)
SWEEP_WINDOW = timedelta(days=2)


@shared_task
def expire_credits() -> int:
    """Expiry entries for every lot whose time has come; idempotent (a lot expires once)."""
    now = timezone.now()
    user_ids = (
        CreditLot.objects.filter(remaining__gt=0, expires_at__lte=now)
        .values_list("account__user_id", flat=True)
        .distinct()
    )
    written = 0
    for user_id in list(user_ids):
        written += len(ledger.expire_due(user_id, now))
    return written


@shared_task
def sweep_grants() -> int:
    """Completions the signal missed (a process died between the commit and the grant):
    jobs completed lately whose owner is not yet activated, or a tutorial not yet counted;
    and verified users settled again. Idempotent: every grant has its key."""
    since = timezone.now() - SWEEP_WINDOW
    missed = (
        Job.objects.filter(state=JobState.COMPLETED, exit_code=0, end_time__gte=since, owner__isnull=False)
        .filter(
            Q(owner__credit_enrollment__activated_at__isnull=True)
            | Q(spec__command=TUTORIAL_COMMAND, owner__credit_enrollment__tutorial_done_at__isnull=True)
        )
        .order_by("end_time")
    )
    settled = 0
    for job in missed[:500]:
        grants.job_finished(job)
        settled += 1
    verified_without_grant = Enrollment.objects.filter(verified_at__gte=since, grants_refused="").values_list(
        "user_id", flat=True
    )
    for user_id in list(verified_without_grant[:500]):
        grants.settle(user_id)
    return settled
