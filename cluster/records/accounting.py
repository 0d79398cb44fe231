"""GPU-second arithmetic over slurmdbd's accounting records: the one place that says what a
run used. Operations figures read it today; billing meters from it.

Pure functions over `cluster.records.types.AccountingRecord`; no Django, no I/O.

Units: every duration and every usage is an **integer** number of seconds.
- GPU-seconds: whole GPUs (`gres/gpu`) x seconds held. 2 A100s for 90 s = 180.
- Shard GB-seconds: GPU memory held by shard jobs (`gres/shard`), in GB x seconds:
  shards x GB per shard x seconds. 3 shards of 4 GB for 10 s = 120.
Times are compared as epoch seconds, rounded down, so a run cut into adjacent windows
adds up to the whole run exactly (Slurm records whole seconds; a window may not be).

What slurmdbd records (seen on the 24.11 dev cluster), and what follows here:
- Each record is one run: a requeued job has one record per run under the same id, so
  records are never merged by job id.
- A job that never started (pending then cancelled, refused at submit) has no start, or the
  "unset" start 2106-02-07 (4294967294) with nodes "None assigned": it used nothing. A
  requeued run can keep the GPUs it asked for in its allocated TRES, so "did it run" is
  decided by times and nodes, never by TRES.
- A running job has no end: it counts up to `now`.
- Shard jobs are recorded as `gres/shard=3` without a GPU type; the type is read from a
  `gres/shard:<type>` entry when slurmdbd tracks one, else from the node the run was on
  (`node_types`), else it is "" (unknown).
- Billing should meter only `record.run_is_settled` records: slurmdbd may record a run's end
  before its start and allocation (`settled` below keeps the others out). A requeued job's
  earlier run is settled for billing (`run_is_settled`) but not `is_settled`: the job is
  not over.
- NVMe cache (the count-only GRES `gres/nvme`, in GB per node): GB-seconds = GB x seconds.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from cluster.records.hostlist import expand_hostlist
from cluster.records.types import NOT_STARTED_NODES, AccountingRecord

GPU_PREFIX = "gres/gpu:"
SHARD_PREFIX = "gres/shard:"


def epoch_seconds(moment: datetime) -> int:
    """Whole seconds since the epoch, rounded down. `moment` must carry a zone."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise ValueError("accounting times must carry a time zone")
    return math.floor(moment.timestamp())


def seconds_between(earlier: datetime, later: datetime) -> int:
    """Real seconds from `earlier` to `later` (negative if later is earlier). Through epoch
    seconds: two datetimes of one zoneinfo subtract in wall-clock time, an hour off across
    a DST change."""
    return epoch_seconds(later) - epoch_seconds(earlier)


def run_interval(record: AccountingRecord, now: datetime) -> tuple[datetime, datetime] | None:
    """When this run held its allocation: (start, end or now), or None if it never ran
    (or starts after `now`)."""
    started = record.start_time
    if started is None or record.nodes in NOT_STARTED_NODES or started > now:
        return None
    ended = min(record.end_time or now, now)
    if ended < started:
        return None
    return started, ended


def seconds_in_window(record: AccountingRecord, start: datetime, end: datetime, *, now: datetime) -> int:
    """Seconds of the run inside [start, end): 0 for a run that never ran or lies outside."""
    interval = run_interval(record, now)
    if interval is None:
        return 0
    run_start, run_end = interval
    overlap = min(epoch_seconds(run_end), epoch_seconds(end)) - max(epoch_seconds(run_start), epoch_seconds(start))
    return max(0, overlap)


def gpus_by_type(record: AccountingRecord) -> dict[str, int]:
    """The run's whole GPUs by type ("gres/gpu:a100": 2 -> {"a100": 2}); GPUs Slurm recorded
    without a type are under ""."""
    typed = {
        key.removeprefix(GPU_PREFIX): count
        for key, count in record.allocated_tres.items()
        if key.startswith(GPU_PREFIX) and count > 0
    }
    untyped = record.gpu_count - sum(typed.values())
    if untyped > 0:
        typed[""] = untyped
    return typed


def shards_by_type(record: AccountingRecord, node_types: Mapping[str, str] | None = None) -> dict[str, int]:
    """The run's GPU shards by GPU type. Typed entries (`gres/shard:a100`) when slurmdbd has
    them; the rest takes the type of the run's nodes from `node_types` (node name -> GPU
    type) when they all have one type, else "" (unknown)."""
    typed = {
        key.removeprefix(SHARD_PREFIX): count
        for key, count in record.allocated_tres.items()
        if key.startswith(SHARD_PREFIX) and count > 0
    }
    untyped = record.allocated_tres.get("gres/shard", 0) - sum(typed.values())
    if untyped > 0:
        types = {(node_types or {}).get(node, "") for node in expand_hostlist(record.nodes)}
        gpu_type = types.pop() if len(types) == 1 else ""
        typed[gpu_type] = typed.get(gpu_type, 0) + untyped
    return typed


@dataclass(frozen=True)
class Usage:
    """What runs used, by GPU type ("" when Slurm did not say). Integer units (see module)."""

    gpu_seconds: dict[str, int] = field(default_factory=dict)
    shard_gb_seconds: dict[str, int] = field(default_factory=dict)

    @property
    def total_gpu_seconds(self) -> int:
        return sum(self.gpu_seconds.values())

    @property
    def total_shard_gb_seconds(self) -> int:
        return sum(self.shard_gb_seconds.values())

    def __add__(self, other: Usage) -> Usage:
        return Usage(_add(self.gpu_seconds, other.gpu_seconds), _add(self.shard_gb_seconds, other.shard_gb_seconds))


def _add(first: Mapping[str, int], second: Mapping[str, int]) -> dict[str, int]:
    total = dict(first)
    for key, value in second.items():
        total[key] = total.get(key, 0) + value
    return dict(sorted(total.items()))


def run_usage(
    record: AccountingRecord,
    start: datetime,
    end: datetime,
    *,
    now: datetime,
    gb_per_shard: int | Mapping[str, int] = 0,
    node_types: Mapping[str, str] | None = None,
) -> Usage:
    """What one run used inside [start, end): GPU-seconds by type, and shard GB-seconds by
    type when `gb_per_shard` says how much GPU memory a shard is (one figure for every
    type, or by type; 0 or a missing type leaves shards out)."""
    seconds = seconds_in_window(record, start, end, now=now)
    if seconds <= 0:
        return Usage()
    gpu_seconds = {gpu_type: count * seconds for gpu_type, count in gpus_by_type(record).items()}
    shard_gb_seconds = {}
    for gpu_type, shards in shards_by_type(record, node_types).items():
        size = gb_per_shard.get(gpu_type, 0) if isinstance(gb_per_shard, Mapping) else gb_per_shard
        if size > 0:
            shard_gb_seconds[gpu_type] = shards * size * seconds
    return Usage(dict(sorted(gpu_seconds.items())), dict(sorted(shard_gb_seconds.items())))


def usage(
    records: Iterable[AccountingRecord],
    start: datetime,
    end: datetime,
    *,
    now: datetime,
    gb_per_shard: int | Mapping[str, int] = 0,
    node_types: Mapping[str, str] | None = None,
) -> Usage:
    """The runs' usage inside [start, end), added up."""
    total = Usage()
    for record in records:
        total += run_usage(record, start, end, now=now, gb_per_shard=gb_per_shard, node_types=node_types)
    return total


def usage_by_user(
    records: Iterable[AccountingRecord],
    start: datetime,
    end: datetime,
    *,
    now: datetime,
    gb_per_shard: int | Mapping[str, int] = 0,
    node_types: Mapping[str, str] | None = None,
) -> dict[str, Usage]:
    """Usage inside [start, end) per Slurm user name; users with no usage are left out."""
    totals: dict[str, Usage] = {}
    for record in records:
        used = run_usage(record, start, end, now=now, gb_per_shard=gb_per_shard, node_types=node_types)
        if used.gpu_seconds or used.shard_gb_seconds:
            totals[record.user_name] = totals.get(record.user_name, Usage()) + used
    return dict(sorted(totals.items()))


def gpu_seconds_by_type(
    records: Iterable[AccountingRecord], start: datetime, end: datetime, *, now: datetime
) -> dict[str, int]:
    """Whole-GPU seconds by type inside [start, end) (`usage(...).gpu_seconds`)."""
    return usage(records, start, end, now=now).gpu_seconds


def gpus_allocated_at(records: Iterable[AccountingRecord], moment: datetime) -> dict[str, int]:
    """Whole GPUs held at `moment`, by type ("" for untyped): the runs that had started by
    then and had not ended (a running job has no end yet)."""
    held: dict[str, int] = {}
    for record in records:
        if record.gpu_count <= 0 or run_interval(record, moment) is None:
            continue
        if record.end_time is not None and record.end_time <= moment:
            continue
        for gpu_type, count in gpus_by_type(record).items():
            held[gpu_type] = held.get(gpu_type, 0) + count
    return dict(sorted(held.items()))


def nvme_gb_seconds(record: AccountingRecord, start: datetime, end: datetime, *, now: datetime) -> int:
    """NVMe cache GB-seconds of the run inside [start, end): GB held x seconds."""
    return record.nvme_gb * seconds_in_window(record, start, end, now=now)


def settled(records: Iterable[AccountingRecord]) -> list[AccountingRecord]:
    """The records slurmdbd has finished writing (`AccountingRecord.is_settled`): what
    billing may meter once and for all."""
    return [record for record in records if record.is_settled]
