"""Who in a group used how much GPU time, from Slurm's accounting (so a member's own sbatch
counts as much as a portal job)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal

from django.conf import settings
from django.core.cache import caches

from cluster.clusters.services import slurm_cli
from cluster.commands.accounts import SlurmAccounts
from groups.models import Group
from groups.queries import sees_everyone

log = logging.getLogger(__name__)


def as_gpu_minutes(tres: str, minutes) -> tuple[str, Decimal] | None:
    """(GPU type, GPU-minutes) of TRES-minutes sacct reported: whole GPUs as they are, a
    GPU-memory share (shard) as its part of a GPU; None for anything else. The one place
    shard-minutes become GPU-minutes (limits, usage rows, the lab view)."""
    kind, _, gpu_type = tres.partition(":")
    if kind not in ("gres/gpu", "gres/shard") or gpu_type not in settings.GPU_TYPES:
        return None
    per_gpu = 1 if kind == "gres/gpu" else int(settings.GPU_TYPES[gpu_type]["shards_per_gpu"])
    return gpu_type, Decimal(minutes) / per_gpu


def gpu_hours_by(held: Mapping[tuple[str, str], Decimal]) -> dict[tuple[str, str], Decimal]:
    """{(who, TRES): minutes} from sacct -> {(who, GPU type): GPU-hours}, exact."""
    hours: dict[tuple[str, str], Decimal] = {}
    for (who, tres), minutes in held.items():
        found = as_gpu_minutes(tres, minutes)
        if found is not None:
            gpu_type, gpu_minutes = found
            hours[(who, gpu_type)] = hours.get((who, gpu_type), Decimal(0)) + gpu_minutes / 60
    return hours


def gpu_hours_by_member(group: Group, since: datetime, until: datetime) -> list[dict]:
    """[{"user", "gpu_type", "gpu_hours"}] for [since, until), a GPU-memory share counted as
    its part of a GPU; GPU-hours to 2 places."""
    held = SlurmAccounts(slurm_cli()).allocated_minutes_by_user(group.slurm_account, since, until)
    return [
        {"user": user, "gpu_type": gpu_type, "gpu_hours": total.quantize(Decimal("0.01"))}
        for (user, gpu_type), total in sorted(gpu_hours_by(held).items())
    ]


USAGE_CACHE_SECONDS = 60


def _cached(key: str):
    try:
        return caches["shared"].get(key)
    except Exception as exc:  # Redis down: read Slurm instead
        log.warning("group usage cache unreadable: %s", exc)
        return None


def _remember(key: str, rows) -> None:
    try:
        caches["shared"].set(key, rows, USAGE_CACHE_SECONDS)
    except Exception as exc:
        log.warning("group usage cache unwritable: %s", exc)


def month_usage_seen_by(user, group: Group, now: datetime) -> tuple[datetime, list[dict]]:
    """(the month's start, its rows) as `user` may see them: every member's for the group's PI,
    managers and admins, their own for a member. Slurm is asked at most once a minute per group
    by all the portal's processes together (the shared cache; with Redis down, each asks for
    itself rather than fail); SlurmError when it does not answer."""
    since = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    key = f"groups:usage:{group.pk}:{since:%Y-%m}"
    rows = _cached(key)
    if rows is None:
        rows = gpu_hours_by_member(group, since, now)
        _remember(key, rows)
    if not sees_everyone(user, group):
        own = getattr(user.profile, "cluster_username", None)
        rows = [row for row in rows if row["user"] == own]
    return since, rows
