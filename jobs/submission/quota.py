"""Plan limits checked before a job is accepted: concurrent GPUs by type, and the free
plan's monthly GPU hours. Callers hold a lock on the user's profile row, so two
submissions of one user cannot both pass the check."""

from __future__ import annotations

import math
from dataclasses import dataclass

from django.conf import settings
from django.db.models import F, Sum
from django.utils import timezone

from jobs.models import FINAL_STATES, Job, JobState
from plans.catalog import PlanSnapshot


class QuotaExceeded(Exception):
    pass


@dataclass(frozen=True)
class GpuUsage:
    active_by_type: dict[str, int]
    gpu_seconds_this_month: int


SWEEP_WAITING_STATES = (JobState.SUBMITTING, JobState.PENDING)


def month_start(now=None):
    now = now or timezone.now()
    return now.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _shards_per_gpu(gpu_type: str) -> int:
    return int(settings.GPU_TYPES.get(gpu_type, {}).get("shards_per_gpu") or 1)


def active_shards_by_type(user) -> dict[str, int]:
    """What the user's unfinished jobs hold or queue, by GPU type, in shards: a whole GPU is
    its type's shards per GPU, a GPU-memory job its own shards (one query)."""
    active = (
        Job.objects.filter(owner=user)
        .exclude(state__in=FINAL_STATES)
        .exclude(gpu_type="")
        # A sweep's tasks count once they run: Slurm holds the others pending at the plan's
        # limit (its QOS), so a sweep of any size can be accepted while one task fits.
        .exclude(sweep__isnull=False, state__in=SWEEP_WAITING_STATES)
        .values("gpu_type")
        .annotate(gpus=Sum("quota_gpus"), shards=Sum("quota_shards"))
    )
    return {
        row["gpu_type"]: (row["gpus"] or 0) * _shards_per_gpu(row["gpu_type"]) + (row["shards"] or 0) for row in active
    }


def active_gpus_by_type(user) -> dict[str, int]:
    """GPUs held or queued by the user's unfinished jobs, by GPU type; shares of GPUs add up
    to whole ones, rounded up (one query)."""
    return {
        gpu_type: math.ceil(shards / _shards_per_gpu(gpu_type))
        for gpu_type, shards in active_shards_by_type(user).items()
    }


def gpu_seconds_this_month(user) -> int:
    """Finished jobs' GPU-seconds since the month began, and running jobs' so far (two queries)."""
    start = month_start()
    finished = (
        Job.objects.filter(owner=user, end_time__gte=start, elapsed_seconds__isnull=False)
        # Whole GPUs only, as for the running ones (`quota_gpus`): shares of a GPU are not hours of one.
        .exclude(tres_per_node__contains="gres/shard")
        .aggregate(total=Sum(F("elapsed_seconds") * F("gpu_count")))["total"]
        or 0
    )
    now = timezone.now()
    running = 0
    for started, gpus in Job.objects.filter(owner=user, state="RUNNING", start_time__isnull=False).values_list(
        "start_time", "quota_gpus"
    ):
        running += int((now - max(started, start)).total_seconds()) * gpus
    return int(finished) + running


def _as_gpus(shards: int, per_gpu: int) -> str:
    whole, part = divmod(shards, per_gpu)
    return f"{whole}" if not part else f"{whole} and {part}/{per_gpu}"


def usage_of(user) -> GpuUsage:
    return GpuUsage(active_gpus_by_type(user), gpu_seconds_this_month(user))


def check_quota(user, plan: PlanSnapshot, gpu_type: str, gpus: int, shards: int = 0) -> None:
    """`gpus` whole GPUs, or `shards` of one (a GPU-memory job): a share counts as its part of
    a GPU, so two 12 GB jobs on a 40 GB A100's shards fit in one A100 of the quota."""
    allowed = plan.gpu_quota.get(gpu_type, 0)
    if allowed <= 0:
        raise QuotaExceeded(f"The {plan.name} plan does not include {gpu_type} GPUs.")
    per_gpu = _shards_per_gpu(gpu_type)
    in_use = active_shards_by_type(user).get(gpu_type, 0)
    asked = gpus * per_gpu + shards
    if in_use + asked > allowed * per_gpu:
        asked_text = f"{gpus}" if gpus else f"{shards} of {per_gpu} shares of one"
        held = _as_gpus(in_use, per_gpu)
        raise QuotaExceeded(
            f"Over quota: your {plan.name} plan allows {allowed} {gpu_type} GPU{'' if allowed == 1 else 's'} at once; "
            f"{held} {'is' if held == '1' else 'are'} held or queued by your jobs and this job asks for {asked_text}."
        )
    if plan.monthly_gpu_hours is None:
        return  # no monthly hours to count (and no queries to count them)
    used_seconds = gpu_seconds_this_month(user)
    if used_seconds >= plan.monthly_gpu_hours * 3600:
        used_hours = used_seconds // 3600
        raise QuotaExceeded(
            f"Your {plan.name} plan's {plan.monthly_gpu_hours} GPU hours for this month are used up "
            f"({used_hours} h used). Upgrade or wait for next month."
        )
