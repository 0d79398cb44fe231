"""Who in a group used how much GPU time, from Slurm's accounting (so a member's own sbatch
counts as much as a portal job)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal

from django.conf import settings

from cluster.accounts import SlurmAccounts
from cluster.services import slurm_cli
from groups.models import Group


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
