"""Telemetry hears of ended jobs (jobs.signals.job_changed, after commit): their efficiency is computed
once, while the minute roll-ups still cover the run."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from jobs.models import FINAL_STATES
from jobs.signals import job_changed
from telemetry.models import JobEfficiency
from telemetry.tasks import compute_job_efficiency

log = logging.getLogger(__name__)


@receiver(job_changed)
def compute_efficiency_of_ended_job(sender, job, **kwargs):
    if job.state not in FINAL_STATES or not job.gpu_allocation or JobEfficiency.objects.filter(job_id=job.pk).exists():
        return
    try:
        compute_job_efficiency.delay(job.pk)
    except Exception:  # the broker is down: telemetry.tasks.compute_missed_efficiencies computes it later
        log.warning("could not queue the efficiency of job %s; the sweep will", job.pk, exc_info=True)
