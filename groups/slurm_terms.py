"""What Slurm must hold for a group: its account (parent, shares) and its limits.

The GPU time a group may use is what admins approved: allocations in force, per GPU type, as
the account's GrpTRESMins (gres/gpu:<type> in GPU-minutes, gres/shard:<type> in shard-minutes,
since a GPU-memory share is a shard request that a GPU-only limit would let through), and
gres/gpu as their sum. A type without an allocation gets 0: with the cluster's `safe`
enforcement Slurm holds such a job (AssocGrpGRESMinutes) instead of starting it.

Slurm forgets usage at every monthly reset (PriorityUsageResetPeriod=MONTHLY on the dev
cluster); an allocation spans months, so the limit written is what is left of it at the
start of the current month: the approved minutes less the GPU-minutes the group's jobs used
earlier in the allocation's period (read from the portal's job rows by the caller).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from cluster.commands.accounts import AccountSpec


def allocated_minutes(
    allocations: Iterable, used_before_reset: Mapping[str, int], hold_percent: int = 100
) -> dict[str, int]:
    """{gpu_type: GPU-minutes Slurm may still allow} from approved allocations in force: each
    allocation's hours (times `hold_percent` %, where Slurm holds new jobs), less what was used
    before the current month's usage reset."""
    minutes: dict[str, int] = {}
    for allocation in allocations:
        held_at = (allocation.approved_gpu_hours or 0) * 60 * hold_percent // 100
        minutes[allocation.gpu_type] = minutes.get(allocation.gpu_type, 0) + held_at
    return {gpu_type: max(0, total - used_before_reset.get(gpu_type, 0)) for gpu_type, total in minutes.items()}


def account_spec(
    group,
    gpu_types: Mapping[str, Mapping],
    minutes_by_type: Mapping[str, int],
    used_since_reset: Mapping[str, int | Decimal] | None = None,
) -> AccountSpec:
    """The account as Slurm must hold it. `minutes_by_type`: GPU-minutes of each type the group
    may use since this month's reset (allocated_minutes); `used_since_reset`: what its jobs have
    held since then, by TRES (gres/gpu:<type> in GPU-minutes, gres/shard:<type> in
    shard-minutes).

    Slurm counts each TRES of GrpTRESMins on its own, so one allowance written whole on both
    the GPU and the shard TRES would let a group spend it twice (once in whole GPUs, once in
    shares). Each kind's limit is what that kind has used plus what is left of the one
    allowance: between two syncs (hourly, and on every change of the group) the group can
    overrun by at most what was left at the last one, not by the whole allocation. A closed
    group gets 0 everywhere and no new submission (GrpSubmitJobs=0)."""
    used = used_since_reset or {}
    closed = group.closed_at is not None
    limits: dict[str, int] = {}
    for gpu_type in sorted(gpu_types):
        shards_per_gpu = int(gpu_types[gpu_type]["shards_per_gpu"])
        gpu_used = int(used.get(f"gres/gpu:{gpu_type}", 0))
        shard_used = int(used.get(f"gres/shard:{gpu_type}", 0))
        if closed:
            limits[f"gres/gpu:{gpu_type}"] = limits[f"gres/shard:{gpu_type}"] = 0
            continue
        left = max(0, minutes_by_type.get(gpu_type, 0) - gpu_used - shard_used // shards_per_gpu)
        limits[f"gres/gpu:{gpu_type}"] = gpu_used + left
        limits[f"gres/shard:{gpu_type}"] = shard_used + left * shards_per_gpu
    limits["gres/gpu"] = sum(limits[f"gres/gpu:{gpu_type}"] for gpu_type in gpu_types)
    limits["gres/shard"] = sum(limits[f"gres/shard:{gpu_type}"] for gpu_type in gpu_types)
    return AccountSpec(
        name=group.slurm_account, parent=group.parent_account, shares=group.shares, gpu_minutes=limits, held=closed
    )
