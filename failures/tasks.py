"""Recording finished runs: one task per ended job (from jobs.signals.job_changed), and a sweep that
records what a lost message or a stopped worker missed. Both take ids and are idempotent."""

from __future__ import annotations

from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from failures import actions
from failures.models import FinishedRun
from jobs.models import FINAL_STATES, Job

# How far back the sweep looks for ended jobs without a record, and how many it records per pass.
SWEEP_HOURS = 48
SWEEP_MAX_JOBS = 500


@shared_task(ignore_result=True, autoretry_for=(OSError,), retry_backoff=True, max_retries=5)
def record_finished_job(job_id: int) -> None:
    actions.record_finished_job(job_id)


@shared_task(ignore_result=True)
def record_missed_runs() -> int:
    since = timezone.now() - timedelta(hours=SWEEP_HOURS)
    missed = (
        Job.objects.filter(state__in=FINAL_STATES, end_time__gte=since)
        .exclude(pk__in=FinishedRun.objects.values("job_id"))
        .order_by("end_time")
        .values_list("pk", flat=True)[:SWEEP_MAX_JOBS]
    )
    recorded = 0
    for job_id in missed:
        recorded += actions.record_finished_job(job_id) is not None
    return recorded


@shared_task(ignore_result=True)
def forget_old_runs() -> int:
    """Finished runs older than FAILURE_RUNS_KEPT_DAYS go (their log tails with them); the marks stay."""
    cutoff = timezone.now() - timedelta(days=settings.FAILURE_RUNS_KEPT_DAYS)
    deleted, _ = FinishedRun.objects.filter(ended_at__lt=cutoff).delete()
    return deleted
