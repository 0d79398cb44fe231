"""A finished job's efficiency: how much of what it held its GPUs used (telemetry's minute and hour
roll-ups over the job's GPUs and run).

- gpu_util_mean / gpu_util_peak: compute utilisation (percent) over the run, all its GPUs;
- gpu_memory_peak_gb against gpu_memory_asked_gb: the most memory one GPU held, and what the job
  asked per GPU (a share's GB, or the whole card's);
- idle_fraction: the share of GPU-minutes under SESSION_IDLE_GPU_PERCENT (the idle culling's line).

And from Slurm's accounting (jobacct_gather, settled on the row by the mirror), where it sampled the run:
- cpu_efficiency: CPU time over elapsed time times the CPUs allocated (0 to 1);
- host_memory_peak_gb against host_memory_asked_gb: the most resident memory a step held, and the
  job's allocated memory. None where slurmdbd has no figure (a run shorter than the gather interval).

A share of a GPU (shards) runs beside other jobs on the same card, and NVML tells a card's use, not a
process's: such a job's figures are the card's (`shared_gpu`), an upper bound of its own.

Minute roll-ups cover the last TELEMETRY_MINUTE_RETENTION; a longer run's earlier hours come from the
hour roll-ups (weighted by their samples). A job with no telemetry for its GPUs has no figures.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, ExpressionWrapper, F, FloatField, Q, Sum
from django.utils import timezone

from cluster.records.gres import parse_tres
from jobs.models import FINAL_STATES, Job
from telemetry.models import GpuHour, GpuMinute, JobEfficiency, cluster_key

SERIES_POINTS = 120
MB_PER_GB = 1024


def _held(job: Job) -> Q:
    held = Q(pk__in=[])
    for node, indexes in (job.gpu_allocation or {}).items():
        held |= Q(node=node, index__in=list(indexes))
    return held & Q(cluster=cluster_key(job.cluster))


def asked_memory_gb(job: Job) -> float | None:
    """Per GPU: a share's GB, or the whole card's (settings.GPU_TYPES)."""
    spec = job.spec or {}
    if spec.get("gpu_memory_gb"):
        return float(spec["gpu_memory_gb"])
    gpu_type = settings.GPU_TYPES.get(job.gpu_type or spec.get("gpu_type", ""))
    return float(gpu_type["memory_gb"]) if gpu_type is not None else None


def _buckets(job: Job, start: datetime, end: datetime) -> list:
    """(bucket, samples, compute mean, memory max MB, minutes it stands for) over the run, minutes first."""
    held = _held(job)
    minutes = list(
        GpuMinute.all_clusters.filter(held, bucket__gte=start.replace(second=0, microsecond=0), bucket__lte=end)
        .order_by("bucket")
        .values_list("bucket", "samples", "compute_util", "memory_used_mb")
    )
    covered_from = minutes[0][0] if minutes else end
    hours = list(
        GpuHour.all_clusters.filter(
            held, bucket__gte=start.replace(minute=0, second=0, microsecond=0), bucket__lt=covered_from
        )
        .order_by("bucket")
        .values_list("bucket", "samples", "compute_util", "memory_used_mb")
    )
    return [(*row, 60) for row in hours] + [(*row, 1) for row in minutes]


def compute(job: Job) -> JobEfficiency | None:
    """Compute and keep a finished job's figures (idempotent); None when it has none to give."""
    if job.state not in FINAL_STATES or not job.gpu_allocation or job.start_time is None:
        return None
    end = job.end_time or timezone.now()
    rows = _buckets(job, job.start_time, end)
    if not rows:
        return None
    weight = sum(minutes for *_rest, minutes in rows)
    util_mean = sum(util * minutes for _b, _s, util, _m, minutes in rows) / weight
    idle = sum(minutes for _b, _s, util, _m, minutes in rows if util < settings.SESSION_IDLE_GPU_PERCENT) / weight
    by_time: dict = {}
    for bucket, _samples, util, memory, _minutes in rows:
        point = by_time.setdefault(bucket, [0.0, 0, 0])
        point[0] += util
        point[1] = max(point[1], memory)
        point[2] += 1
    stride = max(1, -(-len(by_time) // SERIES_POINTS))
    series = [
        [bucket.isoformat(), round(util / count, 1), round(memory / MB_PER_GB, 2)]
        for index, (bucket, (util, memory, count)) in enumerate(sorted(by_time.items()))
        if index % stride == 0
    ]
    efficiency, _ = JobEfficiency.objects.update_or_create(
        job=job,
        defaults={
            "computed_at": timezone.now(),
            "gpu_minutes": weight,
            "gpu_util_mean": round(util_mean, 1),
            "gpu_util_peak": round(max(util for _b, _s, util, _m, _w in rows), 1),
            "gpu_memory_peak_gb": round(max(memory for _b, _s, _u, memory, _w in rows) / MB_PER_GB, 2),
            "gpu_memory_asked_gb": asked_memory_gb(job),
            "idle_fraction": round(idle, 3),
            "shared_gpu": bool((job.spec or {}).get("gpu_memory_gb")),
            "series": series,
        },
    )
    return efficiency


FIELDS = (
    "gpu_util_mean",
    "gpu_util_peak",
    "gpu_memory_peak_gb",
    "gpu_memory_asked_gb",
    "idle_fraction",
    "gpu_minutes",
    "shared_gpu",
)


def as_dict(efficiency: JobEfficiency) -> dict:
    return {name: getattr(efficiency, name) for name in FIELDS}


def host_figures(job: Job) -> dict:
    """CPU and host memory use from the row's accounting figures (None where Slurm has none)."""
    allocated = parse_tres(job.allocated_tres)
    cpus, memory_mb = allocated.get("cpu", 0), allocated.get("mem", 0)
    cpu = None
    if job.cpu_seconds is not None and job.elapsed_seconds and cpus:
        cpu = round(min(1.0, job.cpu_seconds / (job.elapsed_seconds * cpus)), 3)
    peak = job.host_memory_peak_mb
    return {
        "cpu_efficiency": cpu,
        "host_memory_peak_gb": round(peak / MB_PER_GB, 2) if peak else None,
        "host_memory_asked_gb": round(memory_mb / MB_PER_GB, 2) if memory_mb else None,
    }


def efficiencies(jobs: list[Job]) -> dict[int, dict]:
    """The provider jobs.efficiency asks: the kept figures of the given jobs, with their CPU and host
    memory figures beside them."""
    rows = JobEfficiency.objects.filter(job_id__in=[job.pk for job in jobs])
    by_id = {job.pk: job for job in jobs}
    return {row.job_id: {**as_dict(row), **host_figures(by_id[row.job_id]), "series": row.series} for row in rows}


@dataclass(frozen=True)
class EfficiencyRow:
    """One user's, group's or GPU type's ended jobs over a period."""

    key: str
    jobs: int
    gpu_minutes: float  # of telemetry: the GPU-minutes the figures stand on
    util_mean: float  # percent, weighted by GPU-minutes
    idle_gpu_minutes: float  # held but under the idle line

    @property
    def gpu_hours(self) -> float:
        return round(self.gpu_minutes / 60, 2)

    @property
    def idle_gpu_hours(self) -> float:
        return round(self.idle_gpu_minutes / 60, 2)

    @property
    def idle_share(self) -> float:
        return self.idle_gpu_minutes / self.gpu_minutes if self.gpu_minutes else 0.0


GROUPINGS = {"user": "job__owner__username", "group": "job__group__name", "gpu_type": "job__gpu_type"}


def summary(
    by: str, since: datetime, until: datetime, *, owner_id: int | None = None, group_id: int | None = None
) -> list[EfficiencyRow]:
    """Ended jobs' figures per user, group or GPU type over [since, until), the most idle GPU-hours first;
    of one owner's jobs, or one group's, when given."""
    field = GROUPINGS[by]
    rows = JobEfficiency.objects.filter(job__end_time__gte=since, job__end_time__lt=until)
    if owner_id is not None:
        rows = rows.filter(job__owner_id=owner_id)
    if group_id is not None:
        rows = rows.filter(job__group_id=group_id)
    weighted = ExpressionWrapper(F("gpu_util_mean") * F("gpu_minutes"), output_field=FloatField())
    idle = ExpressionWrapper(F("idle_fraction") * F("gpu_minutes"), output_field=FloatField())
    grouped = (
        rows.values(field)
        .annotate(jobs=Count("pk"), minutes=Sum("gpu_minutes"), util=Sum(weighted), idle=Sum(idle))
        .order_by("-idle", field)
    )
    return [
        EfficiencyRow(
            key=row[field] or ("(no group)" if by == "group" else "—"),
            jobs=row["jobs"],
            gpu_minutes=row["minutes"] or 0,
            util_mean=round((row["util"] or 0) / row["minutes"], 1) if row["minutes"] else 0.0,
            idle_gpu_minutes=row["idle"] or 0,
        )
        for row in grouped
    ]
