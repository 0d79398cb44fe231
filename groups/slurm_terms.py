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

from cluster.accounts import AccountSpec


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


def account_spec(group, gpu_types: Mapping[str, Mapping], minutes_by_type: Mapping[str, int]) -> AccountSpec:
    limits: dict[str, int] = {}
    for gpu_type in sorted(gpu_types):
        minutes = minutes_by_type.get(gpu_type, 0)
        limits[f"gres/gpu:{gpu_type}"] = minutes
        limits[f"gres/shard:{gpu_type}"] = minutes * int(gpu_types[gpu_type]["shards_per_gpu"])
    limits["gres/gpu"] = sum(minutes_by_type.get(gpu_type, 0) for gpu_type in gpu_types)
    return AccountSpec(name=group.slurm_account, parent=group.parent_account, shares=group.shares, gpu_minutes=limits)
