"""Metering: slurmdbd's accounting -> one UsageRecord per Slurm job run, exactly once.

A pass (`run_metering`, the beat task `billing.tasks.meter_usage`, every
METERING_INTERVAL_SECONDS) reads every accounting record of the last METERING_WINDOW_HOURS
(a moving window, so slurmdbd may be that late) and, for each run that slurmdbd has finished
writing (`AccountingRecord.run_is_settled`; anything else is left for a later pass):
1. works out what the run used (`runs_of`, pure): seconds = slurmdbd's elapsed; by GPU type,
   GPU-seconds = whole GPUs x seconds; for a shard run GPU memory GB-seconds = shards x GB
   per shard of its type (deploy/gpu_types.json: memory / shards per GPU) x seconds (source
   "shards"); NVMe GB = its `gres/nvme`, GB-seconds = GB x seconds, on the run's first type.
   A run that never started, or that held no GPU, shard or NVMe, is not billed and gets no
   record;
2. maps the Slurm user to the portal user (`Profile.cluster_username`); runs of users the
   portal does not know are skipped and counted (each name logged once per process);
3. writes the runs it has no record of yet, in bulk, ignoring conflicts on the identity
   (cluster, job id, run start, GPU type): the unique constraint makes a re-run over any
   window, or two passes at once, change nothing. A requeued job's runs have distinct
   starts, so each is its own record. Whole-GPU runs get their GPU memory GB-seconds from
   telemetry (billing/usage/telemetry_memory.py, source "telemetry"), or 0 with source "none"
   (the invoice says "GPU-seconds only"). `job` links the portal's job with that Slurm id
   and user;
4. charges every record not yet on an invoice (billing/actions/charging.py), oldest run end first,
   so included hours go to runs in the order they ended. A record left uncharged (a missing
   price) is retried by the next pass.
The pass is recorded on the `metering` SyncRun row (admins see a failing slurmdbd there).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.conf import settings
from django.utils import timezone

from accounts.models import Profile
from billing.actions import charging
from billing.models import UsageRecord
from billing.usage.telemetry_memory import memory_gb_seconds
from cluster.clusters.registry import all_clusters, primary_cluster_name
from cluster.clusters.services import rest_client
from cluster.clusters.sync import record_run
from cluster.errors import SlurmError
from cluster.models import Node
from cluster.records.accounting import epoch_seconds, gpus_by_type, shards_by_type
from cluster.records.hostlist import expand_hostlist
from cluster.records.types import AccountingRecord
from groups.queries import group_ids_for_accounts
from jobs.models import Job

log = logging.getLogger(__name__)
SYNC_NAME = "metering"
WRITE_BATCH = 1000
LOOKUP_BATCH = 1000
CHARGES_PER_PASS = 20000
_unknown_users_logged: set[str] = set()


@dataclass(frozen=True)
class RunUsage:
    """What one run used of one GPU type, from its accounting record alone (pure)."""

    slurm_job_id: int
    user_name: str
    run_start: datetime
    run_end: datetime
    state: str
    seconds: int
    nodes: str
    gpu_type: str
    gpu_count: int = 0
    shards: int = 0
    shard_gb_seconds: Decimal = Decimal(0)
    nvme_gb: int = 0
    # The Slurm account it ran under: a group's account makes it a group run.
    account: str = ""
    # Its QOS: the spot QOS prices it by time window (plans/spot.py, billing/actions/charging.py).
    qos: str = ""

    @property
    def gpu_seconds(self) -> int:
        return self.gpu_count * self.seconds

    @property
    def nvme_gb_seconds(self) -> int:
        return self.nvme_gb * self.seconds

    @property
    def key(self) -> tuple[int, int, str]:
        return (self.slurm_job_id, epoch_seconds(self.run_start), self.gpu_type)


def gb_per_shard(gpu_types: Mapping[str, Mapping]) -> dict[str, Decimal]:
    """GB of GPU memory one shard is, by type (memory / shards per GPU; 40 / 10 = 4)."""
    return {
        name: Decimal(info["memory_gb"]) / Decimal(info["shards_per_gpu"])
        for name, info in gpu_types.items()
        if info.get("shards_per_gpu")
    }


def runs_of(
    record: AccountingRecord, *, shard_gb: Mapping[str, Decimal], node_types: Mapping[str, str] | None = None
) -> list[RunUsage]:
    """The usage of one settled record, one RunUsage per GPU type (a portal job has one type).
    [] for a run not settled, never started, or that held no GPU, shard or NVMe."""
    if not record.run_is_settled or record.start_time is None or record.end_time is None:
        return []
    if record.nodes in ("", "None assigned"):
        return []
    seconds = max(0, record.elapsed_seconds)
    gpus = gpus_by_type(record)
    shards = shards_by_type(record, node_types)
    types = sorted(set(gpus) | set(shards))
    if not types:
        if not record.nvme_gb:
            return []
        types = [""]
    runs = []
    for position, gpu_type in enumerate(types):
        shard_count = 0 if gpus.get(gpu_type) else shards.get(gpu_type, 0)
        size = shard_gb.get(gpu_type, Decimal(0))
        runs.append(
            RunUsage(
                slurm_job_id=record.job_id,
                user_name=record.user_name,
                run_start=record.start_time,
                run_end=record.end_time,
                state=record.state,
                seconds=seconds,
                nodes=record.nodes,
                gpu_type=gpu_type,
                gpu_count=gpus.get(gpu_type, 0),
                shards=shard_count,
                shard_gb_seconds=(shard_count * size * seconds).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP),
                # The NVMe cache is one per run: on its first type only, never counted twice.
                nvme_gb=record.nvme_gb if position == 0 else 0,
                account=record.account,
                qos=record.qos,
            )
        )
    return runs


@dataclass
class MeteringResult:
    records_read: int = 0
    runs: int = 0
    written: int = 0
    charged: int = 0
    unknown_users: int = 0
    uncharged: int = 0
    unknown_user_names: set[str] = field(default_factory=set)

    def summary(self) -> str:
        text = f"{self.records_read} records, {self.runs} runs, {self.written} new, {self.charged} charged"
        if self.unknown_users:
            text += f", {self.unknown_users} runs of unknown users skipped"
        if self.uncharged:
            text += f", {self.uncharged} left uncharged"
        return text


def _batches(items: Sequence, size: int) -> Iterable[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class _NodeGpus:
    """Every GPU index of each node by type, from the mirrored nodes (one query, on demand)."""

    def __init__(self):
        self._indexes: dict[str, dict[str, list[int]]] | None = None

    def indexes(self, node: str, gpu_type: str) -> list[int]:
        if self._indexes is None:
            self._indexes = {}
            for name, groups in Node.objects.values_list("name", "gpus"):
                position, by_type = 0, {}
                for group in groups or []:
                    by_type.setdefault(group["type"], []).extend(range(position, position + group["count"]))
                    position += group["count"]
                self._indexes[name] = by_type
        return self._indexes.get(node, {}).get(gpu_type, [])


def held_gpus(run: RunUsage, job: Mapping | None, node_gpus: _NodeGpus) -> list[tuple[str, int]]:
    """The (node, index) GPUs the run held, or [] when the portal cannot tell (see
    billing/usage/telemetry_memory.py): the mirrored allocation of the job's latest run, else every
    GPU of the type on the run's nodes when the run held all of them."""
    if job and job["gpu_allocation"] and job["start_time"] is not None:
        if epoch_seconds(job["start_time"]) == epoch_seconds(run.run_start):
            return [(node, index) for node, indexes in job["gpu_allocation"].items() for index in indexes]
    nodes = expand_hostlist(run.nodes)
    if not nodes or run.gpu_count % len(nodes):
        return []
    per_node = run.gpu_count // len(nodes)
    held = []
    for node in nodes:
        indexes = node_gpus.indexes(node, run.gpu_type)
        if len(indexes) != per_node:
            return []
        held += [(node, index) for index in indexes]
    return held


def _user_ids(names: Iterable[str], cluster: str) -> dict[str, int]:
    """Portal users by cluster user name. On a further cluster only those the portal made an
    account for there (ClusterAccount): a user of the same name the portal did not make is
    someone else, whose runs are nobody's bill here."""
    names = sorted(set(names))
    profiles = Profile.objects.all()
    if cluster != primary_cluster_name():
        profiles = profiles.filter(cluster_accounts__cluster=cluster, cluster_accounts__provisioned_at__isnull=False)
    found: dict[str, int] = {}
    for batch in _batches(names, LOOKUP_BATCH):
        found.update(profiles.filter(cluster_username__in=batch).values_list("cluster_username", "user_id"))
    return found


def _existing_keys(cluster: str, job_ids: Iterable[int]) -> set[tuple[int, int, str]]:
    keys = set()
    for batch in _batches(sorted(set(job_ids)), LOOKUP_BATCH):
        for job_id, run_start, gpu_type in UsageRecord.objects.filter(
            cluster=cluster, slurm_job_id__in=batch
        ).values_list("slurm_job_id", "run_start", "gpu_type"):
            keys.add((job_id, epoch_seconds(run_start), gpu_type))
    return keys


def _portal_jobs(cluster: str, job_ids: Iterable[int]) -> dict[int, dict]:
    jobs = {}
    for batch in _batches(sorted(set(job_ids)), LOOKUP_BATCH):
        for row in (
            Job.objects.on_cluster(cluster)
            .filter(slurm_job_id__in=batch)
            .values("pk", "slurm_job_id", "cluster_user", "start_time", "gpu_allocation")
        ):
            jobs[row["slurm_job_id"]] = row
    return jobs


def _new_record(
    run: RunUsage, *, cluster: str, user_id: int, job: dict | None, node_gpus: _NodeGpus, group_id: int | None = None
) -> UsageRecord:
    record = UsageRecord(
        group_id=group_id,
        cluster=cluster,
        slurm_job_id=run.slurm_job_id,
        run_start=run.run_start,
        run_end=run.run_end,
        gpu_type=run.gpu_type,
        user_id=user_id,
        job_id=job["pk"] if job else None,
        state=run.state[:32],
        qos=run.qos[:64],
        seconds=run.seconds,
        gpu_count=run.gpu_count,
        gpu_seconds=run.gpu_seconds,
        shards=run.shards,
        nvme_gb=run.nvme_gb,
        nvme_gb_seconds=run.nvme_gb_seconds,
    )
    if run.shards:
        record.gpu_memory_gb_seconds = run.shard_gb_seconds
        record.gpu_memory_source = UsageRecord.MemorySource.SHARDS
    elif run.gpu_count and run.seconds:
        used = memory_gb_seconds(held_gpus(run, job, node_gpus), run.run_start, run.run_end, run.seconds)
        if used is not None:
            record.gpu_memory_gb_seconds = used
            record.gpu_memory_source = UsageRecord.MemorySource.TELEMETRY
    return record


def meter_records(
    records: Iterable[AccountingRecord], *, cluster: str | None = None, gpu_types: Mapping | None = None
) -> MeteringResult:
    """Write and charge the usage of `records` (any window, any number of times: the same
    rows). The database half of a pass; `run_metering` reads the records from slurmdbd."""
    cluster = cluster or settings.SLURM_CLUSTER_NAME
    shard_gb = gb_per_shard(gpu_types if gpu_types is not None else settings.GPU_TYPES)
    node_types = {name: group["type"] for name, groups in Node.objects.values_list("name", "gpus") for group in groups}
    result = MeteringResult()
    runs: list[RunUsage] = []
    for record in records:
        result.records_read += 1
        runs += runs_of(record, shard_gb=shard_gb, node_types=node_types)
    result.runs = len(runs)
    users = _user_ids((run.user_name for run in runs), cluster)
    existing = _existing_keys(cluster, (run.slurm_job_id for run in runs))
    fresh = [run for run in runs if run.key not in existing]
    jobs = _portal_jobs(cluster, (run.slurm_job_id for run in fresh))
    node_gpus = _NodeGpus()
    groups = group_ids_for_accounts({run.account for run in fresh})
    rows = []
    for run in fresh:
        user_id = users.get(run.user_name)
        if user_id is None:
            result.unknown_users += 1
            result.unknown_user_names.add(run.user_name)
            continue
        job = jobs.get(run.slurm_job_id)
        if job is not None and job["cluster_user"] != run.user_name:
            job = None  # Slurm reused the id (a new cluster database): not this run's job
        rows.append(
            _new_record(
                run, cluster=cluster, user_id=user_id, job=job, node_gpus=node_gpus, group_id=groups.get(run.account)
            )
        )
    for batch in _batches(rows, WRITE_BATCH):
        # ignore_conflicts: a pass running at the same time may have written some of them.
        UsageRecord.objects.bulk_create(batch, ignore_conflicts=True)
    result.written = len(rows)
    for name in sorted(result.unknown_user_names - _unknown_users_logged):
        _unknown_users_logged.add(name)
        log.warning("metering: Slurm user %s has no portal account; their runs are not billed", name)
    result.charged, result.uncharged = charge_pending()
    return result


def charge_pending(limit: int = CHARGES_PER_PASS) -> tuple[int, int]:
    """Charge the records not on an invoice yet, oldest run end first. (charged, left)."""
    pending = list(
        UsageRecord.objects.filter(invoice__isnull=True).order_by("run_end", "id").values_list("pk", flat=True)[:limit]
    )
    charged = left = 0
    prices = charging.PriceBook()
    for record_id in pending:
        try:
            if charging.charge(record_id, prices=prices):
                charged += 1
        except charging.ChargeError as exc:
            left += 1
            log.warning("usage record %s left uncharged: %s", record_id, exc)
    return charged, left


def run_metering(now: datetime | None = None) -> MeteringResult | None:
    """One pass over the moving window of every cluster that takes portal jobs, each recorded on
    its own SyncRun row (`metering`, `metering:<cluster>`): a cluster that cannot be read
    leaves the others' metering as it is. Returns the portal's own cluster's outcome."""
    outcome = None
    for cluster in all_clusters():
        if not cluster.takes_jobs:
            continue
        result = _meter_cluster(cluster.name, None if cluster.primary else f"{SYNC_NAME}:{cluster.name}", now)
        if cluster.primary:
            outcome = result
    return outcome


def _meter_cluster(cluster: str, sync_name: str | None, now: datetime | None) -> MeteringResult | None:
    sync_name = sync_name or SYNC_NAME
    started = timezone.now()
    now = now or started
    window = timedelta(hours=settings.METERING_WINDOW_HOURS)
    try:
        records = rest_client(cluster=cluster).list_accounting(now - window, now)
    except SlurmError as exc:
        log.warning("metering: slurmdbd of %s could not be read: %s", cluster, exc)
        record_run(sync_name, started, error=f"slurmdbd could not be read: {exc}")
        return None
    try:
        result = meter_records(records, cluster=cluster)
    except Exception as exc:
        record_run(sync_name, started, error=f"{type(exc).__name__}: {exc}")
        raise
    record_run(sync_name, started, summary=result.summary())
    return result
