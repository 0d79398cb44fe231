"""The lab administrator's view: every group side by side. Share of the pool and fair-share
(sshare), GPU-hours this month by type (sacct, one run for all groups), approved allocations in
force and what they have used, and the average queue wait of the group's jobs this month (the
job mirror). Slurm is asked at most once a minute (cached); a Slurm that does not answer leaves
its columns empty with a note, never the page."""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache
from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q
from django.utils import timezone

from cluster.clusters.services import slurm_cli
from cluster.commands.accounts import SlurmAccounts
from cluster.errors import SlurmError
from groups.models import Allocation, Group
from groups.usage import gpu_hours_by
from jobs.models import Job

CACHE_SECONDS = 60


@dataclass
class GroupFigures:
    group: Group
    members: int
    shares: int
    norm_shares: Decimal | None = None  # the group's part of its organisation's shares (0..1)
    effective_usage: Decimal | None = None  # its part of the usage (0..1)
    gpu_hours: dict[str, Decimal] = field(default_factory=dict)
    allocated_hours: dict[str, int] = field(default_factory=dict)
    allocation_used_hours: dict[str, Decimal] = field(default_factory=dict)
    mean_wait_minutes: Decimal | None = None

    @property
    def total_gpu_hours(self) -> Decimal:
        return sum(self.gpu_hours.values(), Decimal(0))


def _month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _slurm_figures(accounts: list[str], since: datetime, until: datetime) -> tuple[dict, dict, str]:
    """(shares by account, GPU-hours by (account, type), error) from Slurm, cached a minute."""
    key = f"console:lab:{','.join(accounts)}:{since:%Y-%m}"
    cached = cache.get(key)
    if cached is not None:
        return cached
    client = SlurmAccounts(slurm_cli())
    try:
        shares = {row.account: row for row in client.shares(accounts) if not row.user}
        minutes = client.allocated_minutes_by_account(accounts, since, until)
    except SlurmError as exc:
        return {}, {}, f"Slurm did not answer ({exc.public_message}); its columns come back when it does."
    found = (shares, gpu_hours_by(minutes), "")
    cache.set(key, found, CACHE_SECONDS)
    return found


def lab_figures(now: datetime | None = None) -> tuple[list[GroupFigures], str]:
    now = now or timezone.now()
    since = _month_start(now)
    groups = list(
        Group.objects.filter(closed_at__isnull=True)
        .annotate(member_count=Count("memberships", filter=Q(memberships__left_at__isnull=True)))
        .order_by("name")
    )
    shares, hours, error = _slurm_figures([group.slurm_account for group in groups], since, now)
    waits = dict(
        Job.objects.filter(group__in=groups, start_time__gte=since, submit_time__isnull=False)
        .annotate(wait=ExpressionWrapper(F("start_time") - F("submit_time"), output_field=DurationField()))
        .values("group")
        .annotate(mean=Avg("wait"))
        .values_list("group", "mean")
    )
    allocations = Allocation.objects.filter(
        group__in=groups, state=Allocation.State.APPROVED, starts_on__lte=now.date(), ends_on__gt=now.date()
    )
    by_group: dict[int, list[Allocation]] = {}
    for allocation in allocations:
        by_group.setdefault(allocation.group_id, []).append(allocation)
    figures = []
    for group in groups:
        row = shares.get(group.slurm_account)
        found = GroupFigures(
            group=group,
            members=group.member_count,
            shares=group.shares,
            norm_shares=row.norm_shares if row else None,
            effective_usage=row.effective_usage if row else None,
            gpu_hours={t: h.quantize(Decimal("0.01")) for (a, t), h in hours.items() if a == group.slurm_account},
        )
        for allocation in by_group.get(group.pk, []):
            found.allocated_hours[allocation.gpu_type] = found.allocated_hours.get(allocation.gpu_type, 0) + (
                allocation.approved_gpu_hours or 0
            )
            used = (Decimal(allocation.used_gpu_minutes) / 60).quantize(Decimal("0.01"))
            found.allocation_used_hours[allocation.gpu_type] = (
                found.allocation_used_hours.get(allocation.gpu_type, Decimal(0)) + used
            )
        wait = waits.get(group.pk)
        if wait is not None:
            found.mean_wait_minutes = (Decimal(wait.total_seconds()) / 60).quantize(Decimal("0.1"))
        figures.append(found)
    return figures, error


def chart(figures: list[GroupFigures]) -> dict:
    """For static/js/lab.js: GPU-hours by group (stacked by type) and share vs usage."""
    types = sorted({gpu_type for row in figures for gpu_type in row.gpu_hours})
    names = [row.group.name for row in figures]
    return {
        "groups": names,
        "traces": [{"name": t, "hours": [str(row.gpu_hours.get(t, 0)) for row in figures]} for t in types],
        "share": [str(row.norm_shares) if row.norm_shares is not None else None for row in figures],
        "usage": [str(row.effective_usage) if row.effective_usage is not None else None for row in figures],
    }


def as_csv(figures: list[GroupFigures]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    types = sorted(settings.GPU_TYPES)
    writer.writerow(
        ["group", "slurm_account", "members", "shares", "norm_shares", "effective_usage", "mean_wait_minutes"]
        + [f"gpu_hours_{t}" for t in types]
        + [f"allocated_hours_{t}" for t in types]
        + [f"allocation_used_hours_{t}" for t in types]
    )
    for row in figures:
        writer.writerow(
            [row.group.slug, row.group.slurm_account, row.members, row.shares, row.norm_shares, row.effective_usage,
             row.mean_wait_minutes]
            + [row.gpu_hours.get(t, 0) for t in types]
            + [row.allocated_hours.get(t, 0) for t in types]
            + [row.allocation_used_hours.get(t, 0) for t in types]
        )  # fmt: skip
    return out.getvalue()
