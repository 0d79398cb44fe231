"""GPU memory a whole-GPU run used, from telemetry: the average used memory of the GPUs it held
over the run, in GB, times the run's seconds (docs/product.md's worked example: 24 GB average for
1,800 s = 43,200 GB-s).

Which GPUs a run held: the job mirror records Slurm's per-node GPU indexes (`gres_detail`,
"gpu:a100:2(IDX:1-2)") on the portal's Job while it runs, and keeps them once it ends
(`Job.gpu_allocation`). Limits, written down:
- Only the job's latest run has its indexes: a requeued job's earlier runs, and jobs the
  mirror never saw running (shorter than a mirror pass), have none. For those the GPUs are
  known only when the run held every GPU of its type on each of its nodes; otherwise the run
  is charged for GPU-seconds only (source "none"), never for GPUs it may not have held.
- The average is over the samples that exist: each held GPU's mean of its samples inside the
  run, summed over the GPUs (a GPU without samples adds nothing). Raw samples are kept
  TELEMETRY_RAW_RETENTION (2 h); a run metered after they are gone falls back to the minute
  rollups, whose memory is each minute's peak (weighted by its samples), so that estimate
  is a little high.
Exact: sums of integer MB over counts, as Decimal; GB-seconds carry 3 places, half-up (the
field's precision).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

from django.db.models import Count, F, Q, Sum

from telemetry.models import GpuMinute, GpuSampleRaw

MB_PER_GB = 1024
GB_SECONDS_QUANTUM = Decimal("0.001")


def _gpu_filter(gpus: Iterable[tuple[str, int]]) -> Q:
    condition = Q(pk__in=[])
    for node, index in gpus:
        condition |= Q(node=node, index=index)
    return condition


def memory_gb_seconds(gpus: Iterable[tuple[str, int]], start: datetime, end: datetime, seconds: int) -> Decimal | None:
    """GB-seconds of GPU memory `gpus` ((node, index) pairs) used over [start, end], for a run
    of `seconds`; None when telemetry has no sample of any of them in that time."""
    gpus = sorted(set(gpus))
    if not gpus:
        return None
    per_gpu: dict[tuple[str, int], tuple[int, int]] = {}  # (sum of MB, samples)
    raw = (
        GpuSampleRaw.objects.filter(_gpu_filter(gpus), time__gte=start, time__lte=end)
        .values("node", "index")
        .annotate(total=Sum("memory_used_mb"), samples=Count("id"))
    )
    for row in raw:
        per_gpu[(row["node"], row["index"])] = (row["total"], row["samples"])
    missing = [gpu for gpu in gpus if gpu not in per_gpu]
    if missing:
        minutes = (
            GpuMinute.objects.filter(
                _gpu_filter(missing), bucket__gte=start - timedelta(seconds=start.second), bucket__lte=end
            )
            .values("node", "index")
            .annotate(total=Sum(F("memory_used_mb") * F("samples")), samples=Sum("samples"))
        )
        for row in minutes:
            if row["samples"]:
                per_gpu[(row["node"], row["index"])] = (row["total"], row["samples"])
    if not per_gpu:
        return None
    average_mb = sum((Decimal(total) / Decimal(samples) for total, samples in per_gpu.values()), Decimal(0))
    return (average_mb * seconds / MB_PER_GB).quantize(GB_SECONDS_QUANTUM, rounding=ROUND_HALF_UP)
