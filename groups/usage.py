"""Who in a group used how much GPU time, from Slurm's accounting (so a member's own sbatch
counts as much as a portal job)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.core.cache import cache

from cluster.accounts import SlurmAccounts
from cluster.services import slurm_cli
from groups.models import Group
from groups.queries import sees_everyone


def gpu_hours_by_member(group: Group, since: datetime, until: datetime) -> list[dict]:
    """[{"user", "gpu_type", "gpu_hours"}] for [since, until), a GPU-memory share counted as
    its part of a GPU; GPU-hours to 2 places."""
    held = SlurmAccounts(slurm_cli()).allocated_minutes_by_user(group.slurm_account, since, until)
    hours: dict[tuple[str, str], Decimal] = {}
    for (user, tres), minutes in held.items():
        kind, _, gpu_type = tres.partition(":")
        if gpu_type not in settings.GPU_TYPES:
            continue
        gpu_minutes = minutes if kind == "gres/gpu" else minutes / int(settings.GPU_TYPES[gpu_type]["shards_per_gpu"])
        hours[(user, gpu_type)] = hours.get((user, gpu_type), Decimal(0)) + gpu_minutes / 60
    return [
        {"user": user, "gpu_type": gpu_type, "gpu_hours": total.quantize(Decimal("0.01"))}
        for (user, gpu_type), total in sorted(hours.items())
    ]


def month_usage_seen_by(user, group: Group, now: datetime) -> tuple[datetime, list[dict]]:
    """(the month's start, its rows) as `user` may see them: every member's for the group's PI,
    managers and admins, their own for a member. Slurm is asked at most once a minute per group
    (cached); SlurmError when it does not answer."""
    since = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    key = f"groups:usage:{group.pk}:{since:%Y-%m}"
    rows = cache.get(key)
    if rows is None:
        rows = gpu_hours_by_member(group, since, now)
        cache.set(key, rows, 60)
    if not sees_everyone(user, group):
        own = getattr(user.profile, "cluster_username", None)
        rows = [row for row in rows if row["user"] == own]
    return since, rows
