"""The admins' operations figures: pool utilisation, queue wait, hardware ROI.

Pure functions over `cluster.records.types.AccountingRecord` lists (tested without Slurm), plus
`load_records` (the one call to a cluster's slurmrestd) and `gpu_inventory` (every cluster's
nodes: the portal's own Node mirror and the further clusters' as last read).

What a run used (its interval, GPUs by type, GPU-seconds clipped to a window, in integer
seconds) is `cluster.records.accounting`, the one place billing meters from too; this module
cuts the period into buckets and adds runs up against the pool. Only whole GPUs
(`gres/gpu`) count here; GPU shards (`gres/shard`) are not GPU-seconds. A job that never
started holds no GPU and has no queue wait.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from cluster.records.accounting import gpus_by_type, run_interval, seconds_between, seconds_in_window
from cluster.records.types import AccountingRecord

BUCKETS = {"day": timedelta(days=1), "week": timedelta(weeks=1)}


# --- buckets ---------------------------------------------------------------------------
def bucket_bounds(start: datetime, end: datetime, bucket: str) -> list[tuple[datetime, datetime]]:
    """[start, end) cut into days or weeks from `start`; the last one ends at `end`.

    Steps are in wall-clock time of `start`'s zone (a local midnight stays a midnight
    across a DST change); lengths are always measured in real seconds.
    """
    try:
        step = BUCKETS[bucket]
    except KeyError:
        raise ValueError(f"unknown bucket {bucket!r} (known: {', '.join(BUCKETS)})") from None
    if end <= start:
        return []
    bounds = []
    current = start
    while current < end:
        following = current + step
        bounds.append((current, min(following, end)))
        current = following
    return bounds


@dataclass(frozen=True)
class TypeUsage:
    allocated_gpu_seconds: int
    available_gpu_seconds: int

    @property
    def utilisation(self) -> float | None:
        return self.allocated_gpu_seconds / self.available_gpu_seconds if self.available_gpu_seconds else None


@dataclass(frozen=True)
class UtilisationBucket:
    start: datetime
    end: datetime
    allocated_gpu_seconds: int
    available_gpu_seconds: int
    # GPU type -> its share of the above; empty when the inventory was a bare number.
    by_type: dict[str, TypeUsage] = field(default_factory=dict)

    @property
    def utilisation(self) -> float | None:
        """Allocated / available GPU-seconds (a ratio, 0.83 is 83 %); None without GPUs."""
        return self.allocated_gpu_seconds / self.available_gpu_seconds if self.available_gpu_seconds else None


def pool_utilisation(
    records: Iterable[AccountingRecord],
    gpu_inventory: int | Mapping[str, int],
    start: datetime,
    end: datetime,
    bucket: str,
    *,
    now: datetime | None = None,
) -> list[UtilisationBucket]:
    """GPU-seconds allocated per bucket against GPUs in the pool x the bucket's seconds.

    A run counts its GPUs x the part of [start_time, end_time or now] inside each bucket,
    so a run spanning midnight is split between the two days. `gpu_inventory` is the
    pool's GPU count, or counts by type (then each bucket is broken down by type; GPUs of
    a type missing from the inventory still count as allocated).
    """
    now = now or datetime.now(UTC)
    bounds = bucket_bounds(start, end, bucket)
    inventory = dict(gpu_inventory) if isinstance(gpu_inventory, Mapping) else None
    total_gpus = sum(inventory.values()) if inventory is not None else int(gpu_inventory)
    allocated = [0] * len(bounds)
    allocated_by_type: list[dict[str, int]] = [{} for _ in bounds]
    for record in records:
        if record.gpu_count <= 0:
            continue
        types = gpus_by_type(record)
        for index, (bucket_start, bucket_end) in enumerate(bounds):
            overlap = seconds_in_window(record, bucket_start, bucket_end, now=now)
            if overlap <= 0:
                continue
            allocated[index] += record.gpu_count * overlap
            for gpu_type, count in types.items():
                per_type = allocated_by_type[index]
                per_type[gpu_type] = per_type.get(gpu_type, 0) + count * overlap
    result = []
    for index, (bucket_start, bucket_end) in enumerate(bounds):
        seconds = seconds_between(bucket_start, bucket_end)
        by_type = {}
        if inventory is not None:
            for gpu_type in sorted(set(inventory) | set(allocated_by_type[index])):
                by_type[gpu_type] = TypeUsage(
                    allocated_gpu_seconds=allocated_by_type[index].get(gpu_type, 0),
                    available_gpu_seconds=inventory.get(gpu_type, 0) * seconds,
                )
        result.append(
            UtilisationBucket(
                start=bucket_start,
                end=bucket_end,
                allocated_gpu_seconds=allocated[index],
                available_gpu_seconds=total_gpus * seconds,
                by_type=by_type,
            )
        )
    return result


@dataclass(frozen=True)
class WaitBucket:
    start: datetime
    end: datetime
    jobs: int
    average_wait_seconds: float | None
    p95_wait_seconds: float | None


def percentile(values: list[float], fraction: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least `fraction` of all at or below it."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(fraction * len(ordered)))
    return ordered[rank - 1]


def queue_wait(
    records: Iterable[AccountingRecord],
    start: datetime,
    end: datetime,
    bucket: str,
    *,
    now: datetime | None = None,
) -> list[WaitBucket]:
    """Wait (start_time - submit_time) of the runs that started in each bucket.

    Runs that never started (still pending, cancelled or refused before starting) have
    no wait and are left out; a requeued run waits from its requeue.
    """
    now = now or datetime.now(UTC)
    bounds = bucket_bounds(start, end, bucket)
    waits: list[list[int]] = [[] for _ in bounds]
    for record in records:
        interval = run_interval(record, now)
        if interval is None or record.submit_time is None:
            continue
        run_start = interval[0]
        for index, (bucket_start, bucket_end) in enumerate(bounds):
            if bucket_start <= run_start < bucket_end:
                waits[index].append(max(0, seconds_between(record.submit_time, run_start)))
                break
    return [
        WaitBucket(
            start=bucket_start,
            end=bucket_end,
            jobs=len(bucket_waits),
            average_wait_seconds=sum(bucket_waits) / len(bucket_waits) if bucket_waits else None,
            p95_wait_seconds=percentile(bucket_waits, 0.95),
        )
        for (bucket_start, bucket_end), bucket_waits in zip(bounds, waits, strict=True)
    ]


def overall_wait(records: Iterable[AccountingRecord], start: datetime, end: datetime, *, now: datetime | None = None):
    """The whole period as one bucket (for the summary figures)."""
    now = now or datetime.now(UTC)
    bucket = WaitBucket(start, end, 0, None, None)
    span = seconds_between(start, end)
    if span <= 0:
        return bucket
    waits = [
        max(0, seconds_between(record.submit_time, interval[0]))
        for record in records
        if record.submit_time is not None
        and (interval := run_interval(record, now)) is not None
        and start <= interval[0] < end
    ]
    if not waits:
        return bucket
    return WaitBucket(start, end, len(waits), sum(waits) / len(waits), percentile(waits, 0.95))


# --- hardware ROI ----------------------------------------------------------------------
ROI_QUANTUM = Decimal("0.01")


@dataclass(frozen=True)
class RoiInputs:
    name: str
    hardware_cost: Decimal
    power_per_month: Decimal
    running_per_month: Decimal
    revenue_per_month: Decimal
    months: int = 12


@dataclass(frozen=True)
class RoiResult:
    hardware_cost: Decimal
    power_per_month: Decimal
    running_per_month: Decimal
    revenue_per_month: Decimal
    months: int
    monthly_margin: Decimal  # revenue - power - running
    period_margin: Decimal  # months x monthly margin
    roi: Decimal  # period margin / hardware, 2 decimals, half up
    payback_months: Decimal | None  # hardware / monthly margin, 1 decimal; None if it never pays back


def _money(value, name: str) -> Decimal:
    if isinstance(value, float):
        raise TypeError(f"{name} must be a Decimal, int or str, never a float")
    amount = Decimal(value)
    if not amount.is_finite():
        raise ValueError(f"{name} must be a finite amount")
    return amount


def roi(hardware_cost, power_per_month, running_per_month, revenue_per_month, months: int = 12) -> RoiResult:
    """ROI = months x (revenue - power - running) / hardware, in Decimal.

    "Running" is the rest of the monthly running cost (network, maintenance); the article
    calls power + network + maintenance the running cost.
    """
    hardware = _money(hardware_cost, "hardware_cost")
    power = _money(power_per_month, "power_per_month")
    running = _money(running_per_month, "running_per_month")
    revenue = _money(revenue_per_month, "revenue_per_month")
    if hardware <= 0:
        raise ValueError("hardware_cost must be more than 0")
    if min(power, running, revenue) < 0:
        raise ValueError("monthly amounts cannot be negative")
    if isinstance(months, bool) or not isinstance(months, int) or months < 1:
        raise ValueError("months must be a whole number of at least 1")
    margin = revenue - power - running
    period_margin = margin * months
    payback = (hardware / margin).quantize(Decimal("0.1"), rounding=ROUND_HALF_UP) if margin > 0 else None
    return RoiResult(
        hardware_cost=hardware,
        power_per_month=power,
        running_per_month=running,
        revenue_per_month=revenue,
        months=months,
        monthly_margin=margin,
        period_margin=period_margin,
        roi=(period_margin / hardware).quantize(ROI_QUANTUM, rounding=ROUND_HALF_UP),
        payback_months=payback,
    )


def roi_of(inputs: RoiInputs) -> RoiResult:
    return roi(
        inputs.hardware_cost,
        inputs.power_per_month,
        inputs.running_per_month,
        inputs.revenue_per_month,
        inputs.months,
    )


# The source article's hardware table (docs/product.md, "Hardware ROI"): its inputs only. Its
# ROI column does not follow from its own formula and is deliberately not kept here.
ARTICLE_CONFIGS: tuple[RoiInputs, ...] = (
    RoiInputs("8x RTX 4090", Decimal("12000"), Decimal("280"), Decimal("150"), Decimal("3200")),
    RoiInputs("4x A100", Decimal("48000"), Decimal("420"), Decimal("200"), Decimal("8500")),
    RoiInputs("2x H100", Decimal("120000"), Decimal("650"), Decimal("250"), Decimal("15000")),
)


# --- loaders -----------------------------------------------------------------------------
def load_records(client, start: datetime, end: datetime) -> list[AccountingRecord]:
    """Accounting records overlapping [start, end] from slurmdbd (via slurmrestd).

    Raises `cluster.errors.SlurmError` subclasses; the caller shows them.
    """
    return client.list_accounting(start, end)


def gpu_inventory() -> dict[str, int]:
    """GPUs in the pool by type, every cluster's (every node, drained ones included:
    utilisation is measured against the pool that was bought)."""
    return merged_inventory(gpu_inventory_by_cluster().values())


def gpu_inventory_by_cluster() -> dict[str, dict[str, int]]:
    """Cluster -> its GPUs by type: the portal's own (its Node mirror) first, then each further
    cluster whose nodes are read (as last read, however long ago: its GPUs are still bought)."""
    # Imported here: the rest of this module is a pure core, tested without the database.
    from cluster.actions.further_nodes import nodes_in_pool
    from cluster.clusters.registry import primary_cluster_name

    clusters: dict[str, dict[str, int]] = {primary_cluster_name(): {}}
    for node in nodes_in_pool():
        totals = clusters.setdefault(node.cluster, {})
        for group in node.gpus or []:
            totals[group["type"]] = totals.get(group["type"], 0) + int(group["count"])
    return {name: dict(sorted(totals.items())) for name, totals in clusters.items()}


def merged_inventory(inventories: Iterable[Mapping[str, int]]) -> dict[str, int]:
    totals: dict[str, int] = {}
    for inventory in inventories:
        for gpu_type, count in inventory.items():
            totals[gpu_type] = totals.get(gpu_type, 0) + count
    return dict(sorted(totals.items()))
