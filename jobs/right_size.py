"""Right-sizing where the next job is asked for: a clone of a job whose GPU memory peak was well
under the whole GPU it asked for is offered the share of a GPU that fits, with what the job would
have cost on it and how much sooner such jobs have started lately.

The peak is telemetry's (jobs.efficiency); a share is whole shards of the type's memory
(foundation.gpu_types), with HEADROOM over the peak, and is offered only when it is at most half the
card: a share runs beside other jobs, so a job that nearly fills the card keeps it.

A template has no run of its own: its evidence is the user's last jobs of the same image on the same
GPU type. A plan that shrinks (Plan.right_sizing) gives a new one-GPU job the share itself when the
user's last EVIDENCE_JOBS jobs on the type all fit one (`standing_shrink`); a job asked with
`keep_whole_gpu` keeps the whole GPU, and one asked for in a reservation or as a share is left alone.
The shrunk job is priced as the share it runs on, through the one charge split (jobs.costs).
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
from jobs.efficiency import efficiencies_for, efficiency_for
from jobs.models import Job
from jobs.submission.spec import JobSpec, job_spec_from_dict

HEADROOM = 1.25
WAIT_DAYS = 14
WAIT_SAMPLES = 5
# Jobs that must all have fitted a share before a template is advised or a plan shrinks the next ask.
EVIDENCE_JOBS = 3
EVIDENCE_DAYS = 30


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


def _gpu_type(name: str):
    return dict(gpu_types_from_mapping(settings.GPU_TYPES)).get(name)


def _as_share(spec: dict, share_gb: int, **changes) -> dict:
    """A stored spec asking for `share_gb` of one GPU instead of whole GPUs."""
    shared = {key: value for key, value in spec.items() if key != "gpu_count"}
    return {**shared, "gpu_memory_gb": share_gb, **changes}


def fitting_share_gb(gpu_type_name: str, peak_gb: float) -> int | None:
    """GB of the share that holds `peak_gb` with headroom, when it is at most half the card."""
    gpu_type = _gpu_type(gpu_type_name)
    if gpu_type is None or gpu_type.shards_per_gpu <= 1:
        return None
    shards = max(1, math.ceil(peak_gb * HEADROOM / gpu_type.shard_gb))
    share_gb = shards * gpu_type.shard_gb
    return share_gb if share_gb * 2 <= gpu_type.memory_gb else None


def _whole_gpu_peak(job: Job, figures: dict | None) -> float | None:
    """The GPU memory peak of a finished one-whole-GPU job, None for any other job or without figures."""
    if not figures or figures["shared_gpu"] or (job.spec or {}).get("gpu_count") != 1:
        return None
    return figures["gpu_memory_peak_gb"] or None


def proposal_for(job: Job, user) -> Proposal | None:
    """The share a clone of `job` could ask for, or None (no figures, a share already, several GPUs, no fit)."""
    peak = _whole_gpu_peak(job, efficiency_for(job) if job.is_final else None)
    share_gb = fitting_share_gb(job.spec.get("gpu_type", ""), peak) if peak else None
    return _proposal(job, user, peak, share_gb) if share_gb else None


def _proposal(job: Job, user, peak_gb: float, share_gb: int) -> Proposal:
    spec = job.spec
    gpu_type = _gpu_type(spec["gpu_type"])
    whole = job_spec_from_dict(spec)
    minutes = max(1, math.ceil((job.elapsed_seconds or whole.time_limit_minutes * 60) / 60))
    as_run = quote_runs(user, replace(whole, time_limit_minutes=minutes), runs=1)
    on_share = quote_runs(user, job_spec_from_dict(_as_share(spec, share_gb, time_limit_minutes=minutes)), runs=1)
    return Proposal(
        job_id=job.pk,
        gpu_type=gpu_type.name,
        asked_gb=float(gpu_type.memory_gb),
        peak_gb=peak_gb,
        share_gb=share_gb,
        cost_as_run=as_run.total_text if as_run else None,
        cost_on_share=on_share.total_text if on_share else None,
        wait_whole_minutes=_median_wait_minutes(gpu_type.name, shares=False),
        wait_share_minutes=_median_wait_minutes(gpu_type.name, shares=True),
    )


def apply(values: dict, proposal: Proposal) -> dict:
    """The job form's values with the share asked instead of the whole GPU."""
    return {**values, "gpu_count": "", "gpu_memory_gb": proposal.share_gb}


def _evidence(user, gpu_type: str, *, image: str | None = None) -> list[tuple[Job, float]]:
    """The user's last EVIDENCE_JOBS finished one-whole-GPU jobs on `gpu_type` (of `image`, when given)
    with their GPU memory peaks, newest first; fewer when some have no figures."""
    since = timezone.now() - timedelta(days=EVIDENCE_DAYS)
    jobs = Job.objects.filter(owner=user, gpu_type=gpu_type, end_time__gte=since, quota_shards=0, spec__gpu_count=1)
    if image is not None:
        jobs = jobs.filter(image=image)
    recent = [job for job in jobs.order_by("-end_time", "-pk")[:EVIDENCE_JOBS] if job.is_final]
    figures = efficiencies_for(recent)
    peaks = [(job, _whole_gpu_peak(job, figures.get(job.pk))) for job in recent]
    return [(job, peak) for job, peak in peaks if peak]


def _all_fit(evidence: list[tuple[Job, float]]) -> tuple[Job, float, int] | None:
    """The job with the highest peak and the share that holds it, when there are EVIDENCE_JOBS and that
    share holds every one."""
    if len(evidence) < EVIDENCE_JOBS:
        return None
    job, peak = max(evidence, key=lambda pair: pair[1])
    share_gb = fitting_share_gb(job.gpu_type, peak)
    return (job, peak, share_gb) if share_gb else None


def proposal_for_template(spec: dict, user) -> Proposal | None:
    """The share a template asking for one whole GPU could ask for: from the user's last jobs of the
    same image on its GPU type, all of which must fit the share."""
    if spec.get("gpu_count") != 1 or not spec.get("image"):
        return None
    worst = _all_fit(_evidence(user, spec.get("gpu_type", ""), image=spec["image"]))
    return _proposal(worst[0], user, worst[1], worst[2]) if worst else None


@dataclass(frozen=True)
class Shrink:
    """A new job's ask made the share its owner's last jobs fitted (the plan shrinks)."""

    spec: JobSpec
    record: dict  # kept on the job as Job.right_sized


def standing_shrink(user, spec: JobSpec, plan) -> Shrink | None:
    """The share the next one-whole-GPU job on this type gets under a plan that shrinks, or None."""
    if plan.right_sizing != "shrink" or spec.gpu.count != 1 or spec.spot:
        return None
    evidence = _evidence(user, spec.gpu.gpu_type)
    worst = _all_fit(evidence)
    if worst is None:
        return None
    _job, peak, share_gb = worst
    return Shrink(
        spec=job_spec_from_dict(_as_share(spec.to_dict(), share_gb)),
        record={
            "asked_gpus": 1,
            "whole_gpu_gb": _gpu_type(spec.gpu.gpu_type).memory_gb,
            "share_gb": share_gb,
            "peak_gb": peak,
            "evidence_jobs": sorted(job.pk for job, _peak in evidence),
            "plan": plan.code,
        },
    )
