"""Telemetry hears of ended jobs (jobs.signals.job_changed, after commit): their efficiency is computed
once, while the minute roll-ups still cover the run."""

from __future__ import annotations

from django.dispatch import receiver

from foundation.enqueue import delay_or_leave_to_sweep
from jobs.models import FINAL_STATES
from jobs.signals import job_changed
from telemetry.models import JobEfficiency
from telemetry.tasks import compute_job_efficiency


@receiver(job_changed)
def compute_efficiency_of_ended_job(sender, job, **kwargs):
    if job.state not in FINAL_STATES or not job.gpu_allocation or JobEfficiency.objects.filter(job_id=job.pk).exists():
        return
    delay_or_leave_to_sweep(compute_job_efficiency, job.pk, sweep="telemetry.tasks.compute_missed_efficiencies")
