"""Keeping Slurm in step with the plans: after an admin edits a plan, and at the start of
each month (the free plan's GPU-hours begin again)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError
from django.utils import timezone

from cluster.clusters.services import slurm_cli
from cluster.errors import RETRY_WHILE_SLURM_IS_AWAY
from plans import enforcement
from plans.models import MonthlyUsageReset, billing_zone

log = logging.getLogger(__name__)


@shared_task(max_retries=8, **RETRY_WHILE_SLURM_IS_AWAY)
def sync_slurm_limits() -> int:
    """Write every plan's QOS and every subscriber's association (idempotent)."""
    return len(enforcement.sync())


@shared_task(max_retries=8, **RETRY_WHILE_SLURM_IS_AWAY)
def reset_monthly_usage() -> str:
    """Once a month: zero the usage of every association with a GPU-minute budget.

    Slurm's own PriorityUsageResetPeriod=MONTHLY does the same on a configured cluster; this
    is the portal's guarantee for clusters configured otherwise. It runs only on the first
    day of the month in the billing zone (plans.models.billing_zone: the zone invoices close
    their months in, so a free plan's hours begin again when its month does) and records the
    month, so a repeat or a second worker does nothing; a reset found missing later in the
    month is logged for admins, not done then, because it would hand free users a second
    budget."""
    now = timezone.now().astimezone(billing_zone())
    month = now.date().replace(day=1)
    if MonthlyUsageReset.objects.filter(month=month).exists():
        return "done already"
    if now.day != 1:
        log.error("the monthly GPU-minute reset of %s did not run on the 1st; reset by hand if Slurm did not", month)
        return "missed"
    cli = slurm_cli()
    users = [limits.user for limits in enforcement.capped_associations()]
    for user in users:
        cli.reset_user_usage(user, settings.SLURM_ACCOUNT)
    try:
        MonthlyUsageReset.objects.create(month=month, associations=len(users))
    except IntegrityError:
        return "done already"
    return f"reset {len(users)}"
