"""The weekly efficiency digest: each user, and each group's PI for the group, hears what their jobs
that ended in the week held, how much of it sat idle, and what the idle part cost.

The figures are the job pages' (telemetry/efficiency.py), the costs the invoices' (jobs.costs, whose
provider is billing's): the idle part of a job's cost is its cost times its idle share, to the cent
(foundation.money.to_cents, the one rounding rule). Sent once per recipient and week: the week's key
is recorded (DigestSent), so a second run of the task sends nothing twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.models import DigestSent
from foundation.money import format_amount, to_cents
from groups.models import GroupRole, Membership
from jobs.costs import costs_for
from jobs.models import Job
from telemetry.models import JobEfficiency

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Digest:
    jobs: int
    gpu_hours: float
    util_mean: float
    idle_gpu_hours: float
    cost: Decimal
    idle_cost: Decimal

    def text(self, whose: str) -> str:
        share = self.idle_gpu_hours / self.gpu_hours if self.gpu_hours else 0.0
        return (
            f"{whose} {self.jobs} job{'s' * (self.jobs != 1)} that ended this week held {self.gpu_hours:.1f} "
            f"GPU-hours at {self.util_mean:.0f} % mean compute. {self.idle_gpu_hours:.1f} GPU-hours ({share:.0%}) "
            f"sat idle: ${format_amount(self.idle_cost)} of ${format_amount(self.cost)}.\n"
        )


def digest_of(jobs) -> Digest | None:
    figures = {row.job_id: row for row in JobEfficiency.objects.filter(job__in=jobs)}
    if not figures:
        return None
    ended = list(Job.objects.filter(pk__in=figures))
    costs = costs_for(ended)
    minutes = sum(row.gpu_minutes for row in figures.values())
    cost = idle_cost = Decimal(0)
    for job in ended:
        amount = costs[job.pk].cost if job.pk in costs and costs[job.pk].cost is not None else Decimal(0)
        cost += amount
        idle_cost += amount * Decimal(str(figures[job.pk].idle_fraction or 0))
    return Digest(
        jobs=len(figures),
        gpu_hours=minutes / 60,
        util_mean=sum((row.gpu_util_mean or 0) * row.gpu_minutes for row in figures.values()) / minutes,
        idle_gpu_hours=sum((row.idle_fraction or 0) * row.gpu_minutes for row in figures.values()) / 60,
        cost=to_cents(cost),
        idle_cost=to_cents(idle_cost),
    )


def _send_once(key: str, user, subject: str, body: str) -> bool:
    if not user.email:
        return False
    try:
        with transaction.atomic():
            DigestSent.objects.create(key=key, user=user)
    except IntegrityError:
        return False  # this week's already went
    try:
        send_mail(subject, body, settings.DEFAULT_FROM_EMAIL, [user.email])
    except Exception:
        DigestSent.objects.filter(key=key, user=user).delete()  # the next run tries again
        log.exception("the digest %s to user %s failed", key, user.pk)
        return False
    return True


def ended_in_week(now: datetime):
    """Jobs with figures that ended in the 7 days before `now`: what a digest, and the pages that show
    the same figures (billing's usage page, a group's money page), count."""
    return Job.objects.filter(end_time__gte=now - timedelta(days=7), end_time__lt=now, efficiency__isnull=False)


def send_weekly_digests(now: datetime | None = None) -> int:
    """One e-mail per user with ended jobs in the last 7 days, one per group to its PI; the count sent."""
    now = now or timezone.now()
    week = f"{now.isocalendar().year}-W{now.isocalendar().week:02d}"
    ended = ended_in_week(now)
    sent = 0
    for user in get_user_model().objects.filter(pk__in=ended.values("owner_id")):
        digest = digest_of(ended.filter(owner=user))
        if digest is not None:
            body = digest.text("Your") + (
                f"\nYour usage page shows these figures, by GPU type too: {settings.SITE_URL}/billing/usage/\n"
                f"Each job's page shows how it used its GPUs: {settings.SITE_URL}/jobs/\n"
            )
            sent += _send_once(f"user:{week}", user, "Your GPU week", body)
    for pi in Membership.objects.active().filter(role=GroupRole.PI).select_related("group", "user"):
        digest = digest_of(ended.filter(group=pi.group))
        if digest is not None:
            body = digest.text(f"{pi.group.name}'s")
            sent += _send_once(f"group:{pi.group_id}:{week}", pi.user, f"{pi.group.name}: the GPU week", body)
    return sent
