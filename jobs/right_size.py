"""Right-sizing where the next job is asked for: a clone of a job whose GPU memory peak was well
under the whole GPU it asked for is offered the share of a GPU that fits, with what the job would
have cost on it and how much sooner such jobs have started lately.

The peak is telemetry's (jobs.efficiency); a share is whole shards of the type's memory
(foundation.gpu_types), with HEADROOM over the peak, and is offered only when it is at most half the
card: a share runs beside other jobs, so a job that nearly fills the card keeps it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import timedelta
from statistics import median

from django.conf import settings
from django.utils import timezone

from foundation.gpu_types import gpu_types_from_mapping
from jobs.costs import quote_runs
from jobs.efficiency import efficiency_for
from jobs.models import Job
from jobs.submission.spec import job_spec_from_dict

HEADROOM = 1.25
WAIT_DAYS = 14
WAIT_SAMPLES = 5


@dataclass(frozen=True)
class Proposal:
    job_id: int
    gpu_type: str
    asked_gb: float
    peak_gb: float
    share_gb: int
    cost_as_run: str | None  # USD, at today's prices, for the run's elapsed time
    cost_on_share: str | None
    wait_whole_minutes: int | None  # median wait of the type's whole-GPU jobs lately
    wait_share_minutes: int | None


def _median_wait_minutes(gpu_type: str, *, shares: bool) -> int | None:
    since = timezone.now() - timedelta(days=WAIT_DAYS)
    jobs = Job.objects.filter(gpu_type=gpu_type, start_time__gte=since, submit_time__isnull=False)
    jobs = jobs.filter(quota_shards__gt=0) if shares else jobs.filter(quota_shards=0, quota_gpus__gt=0)
    waits = [
        (started - submitted).total_seconds() / 60
        for started, submitted in jobs.values_list("start_time", "submit_time")[:2000]
        if started >= submitted
    ]
    return round(median(waits)) if len(waits) >= WAIT_SAMPLES else None


def proposal_for(job: Job, user) -> Proposal | None:
    """The share a clone of `job` could ask for, or None (no figures, a share already, several GPUs, no fit)."""
    figures = efficiency_for(job) if job.is_final else None
    spec = job.spec or {}
    if not figures or figures["shared_gpu"] or spec.get("gpu_count") != 1 or not figures["gpu_memory_peak_gb"]:
        return None
    gpu_type = dict(gpu_types_from_mapping(settings.GPU_TYPES)).get(spec.get("gpu_type", ""))
    if gpu_type is None or gpu_type.shards_per_gpu <= 1:
        return None
    shards = max(1, math.ceil(figures["gpu_memory_peak_gb"] * HEADROOM / gpu_type.shard_gb))
    share_gb = shards * gpu_type.shard_gb
    if share_gb * 2 > gpu_type.memory_gb:
        return None
    whole = job_spec_from_dict(spec)
    minutes = max(1, math.ceil((job.elapsed_seconds or whole.time_limit_minutes * 60) / 60))
    as_run = quote_runs(user, replace(whole, time_limit_minutes=minutes), runs=1)
    shared = dict(spec, gpu_memory_gb=share_gb, time_limit_minutes=minutes)
    shared.pop("gpu_count", None)
    on_share = quote_runs(user, job_spec_from_dict(shared), runs=1)
    return Proposal(
        job_id=job.pk,
        gpu_type=gpu_type.name,
        asked_gb=float(gpu_type.memory_gb),
        peak_gb=figures["gpu_memory_peak_gb"],
        share_gb=share_gb,
        cost_as_run=as_run.total_text if as_run else None,
        cost_on_share=on_share.total_text if on_share else None,
        wait_whole_minutes=_median_wait_minutes(gpu_type.name, shares=False),
        wait_share_minutes=_median_wait_minutes(gpu_type.name, shares=True),
    )


def apply(values: dict, proposal: Proposal) -> dict:
    """The job form's values with the share asked instead of the whole GPU."""
    return {**values, "gpu_count": "", "gpu_memory_gb": proposal.share_gb}
