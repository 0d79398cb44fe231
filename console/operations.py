"""The admins' operations figures: pool utilisation, queue wait, hardware ROI.

Pure functions over `cluster.types.AccountingRecord` lists (tested without Slurm), plus
`load_records` (the one call to slurmrestd) and `gpu_inventory` (the Node mirror).

Conventions, from what slurmdbd really records (seen on the 24.11 dev cluster):
- Each record is one run: a requeued job has one record per run, under the same id, so
  records are never merged by job id.
- A job that never started (pending then cancelled, refused at submit) has no start, or
  the "unset" start 2106-02-07 (4294967294) with nodes "None assigned": it holds no GPU
  and has no queue wait. A requeued run can even keep the GPUs it asked for in its
  allocated TRES, so "did it run" is decided by times and nodes, never by TRES.
- Only whole GPUs (`gres/gpu`) count; GPU shards (`gres/shard`) are not GPU-seconds here.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from cluster.types import AccountingRecord

BUCKETS = {"day": timedelta(days=1), "week": timedelta(weeks=1)}
_NOT_STARTED_NODES = {"", "None assigned"}


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


def _seconds(earlier: datetime, later: datetime) -> float:
    # timestamp() rather than `later - earlier`: two datetimes of one zoneinfo subtract
    # in wall-clock time, an hour off across a DST change.
    return later.timestamp() - earlier.timestamp()


def run_interval(record: AccountingRecord, now: datetime) -> tuple[datetime, datetime] | None:
    """When this run held its allocation: [start, end or now], or None if it never ran."""
    started = record.start_time
    if started is None or record.nodes in _NOT_STARTED_NODES or started > now:
        return None
    ended = min(record.end_time or now, now)
    if ended < started:
        return None
    return started, ended


def gpus_by_type(record: AccountingRecord) -> dict[str, int]:
    """The run's whole GPUs by type ("gres/gpu:a100": 2 -> {"a100": 2}); GPUs Slurm
    recorded without a type are under ""."""
    typed = {
        key.removeprefix("gres/gpu:"): count
        for key, count in record.allocated_tres.items()
        if key.startswith("gres/gpu:") and count > 0
    }
    untyped = record.gpu_count - sum(typed.values())
    if untyped > 0:
        typed[""] = untyped
    return typed


@dataclass(frozen=True)
class TypeUsage:
    allocated_gpu_seconds: float
    available_gpu_seconds: float

    @property
    def utilisation(self) -> float | None:
        return self.allocated_gpu_seconds / self.available_gpu_seconds if self.available_gpu_seconds else None


@dataclass(frozen=True)
class UtilisationBucket:
    start: datetime
    end: datetime
    allocated_gpu_seconds: float
    available_gpu_seconds: float
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
    allocated = [0.0] * len(bounds)
    allocated_by_type: list[dict[str, float]] = [{} for _ in bounds]
    for record in records:
        if record.gpu_count <= 0:
            continue
        interval = run_interval(record, now)
        if interval is None:
            continue
        run_start, run_end = interval
        types = gpus_by_type(record)
        for index, (bucket_start, bucket_end) in enumerate(bounds):
            overlap = _seconds(max(run_start, bucket_start), min(run_end, bucket_end))
            if overlap <= 0:
                continue
            allocated[index] += record.gpu_count * overlap
            for gpu_type, count in types.items():
                per_type = allocated_by_type[index]
                per_type[gpu_type] = per_type.get(gpu_type, 0.0) + count * overlap
    result = []
    for index, (bucket_start, bucket_end) in enumerate(bounds):
        seconds = _seconds(bucket_start, bucket_end)
        by_type = {}
        if inventory is not None:
            for gpu_type in sorted(set(inventory) | set(allocated_by_type[index])):
                by_type[gpu_type] = TypeUsage(
                    allocated_gpu_seconds=allocated_by_type[index].get(gpu_type, 0.0),
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


def gpus_allocated_at(records: Iterable[AccountingRecord], moment: datetime) -> dict[str, int]:
    """Whole GPUs held at `moment`, by type ("" for untyped): the runs that had started by
    then and had not ended (a running job has no end yet). What "busy now" means, whatever
    the period's average says."""
    held: dict[str, int] = {}
    for record in records:
        if record.gpu_count <= 0 or run_interval(record, moment) is None:
            continue
        if record.end_time is not None and record.end_time <= moment:
            continue
        for gpu_type, count in gpus_by_type(record).items():
            held[gpu_type] = held.get(gpu_type, 0) + count
    return dict(sorted(held.items()))


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
    waits: list[list[float]] = [[] for _ in bounds]
    for record in records:
        interval = run_interval(record, now)
        if interval is None or record.submit_time is None:
            continue
        run_start = interval[0]
        for index, (bucket_start, bucket_end) in enumerate(bounds):
            if bucket_start <= run_start < bucket_end:
                waits[index].append(max(0.0, _seconds(record.submit_time, run_start)))
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
    span = _seconds(start, end)
    if span <= 0:
        return bucket
    waits = [
        max(0.0, _seconds(record.submit_time, interval[0]))
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


# The source article's hardware table (PRODUCT.md, "Hardware ROI"): its inputs only. Its
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
    """GPUs in the pool by type, from the Node mirror (every node, drained ones included:
    utilisation is measured against the pool that was bought)."""
    from cluster.models import Node

    totals: dict[str, int] = {}
    for gpus in Node.objects.values_list("gpus", flat=True):
        for group in gpus or []:
            totals[group["type"]] = totals.get(group["type"], 0) + int(group["count"])
    return dict(sorted(totals.items()))
