"""Failures hear of ended jobs (jobs.signals.job_changed, sent after commit) and record each once."""

from __future__ import annotations

from django.dispatch import receiver

from failures.actions import outcome_of
from failures.models import FinishedRun
from failures.tasks import record_finished_job
from foundation.enqueue import delay_or_leave_to_sweep
from jobs.signals import job_changed


@receiver(job_changed)
def record_ended_job(sender, job, **kwargs):
    # Every later write of an ended job's row is told here too: only the first is recorded.
    if outcome_of(job) is None or FinishedRun.objects.filter(job_id=job.pk).exists():
        return
    delay_or_leave_to_sweep(record_finished_job, job.pk, sweep="failures.tasks.record_missed_runs")
