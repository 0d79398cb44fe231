"""Failures hear of ended jobs (jobs.signals.job_changed, sent after commit) and record each once."""

from __future__ import annotations

import logging

from django.dispatch import receiver

from failures.actions import outcome_of
from failures.models import FinishedRun
from failures.tasks import record_finished_job
from jobs.signals import job_changed

log = logging.getLogger(__name__)


@receiver(job_changed)
def record_ended_job(sender, job, **kwargs):
    # Every later write of an ended job's row is told here too: only the first is recorded.
    if outcome_of(job) is None or FinishedRun.objects.filter(job_id=job.pk).exists():
        return
    try:
        record_finished_job.delay(job.pk)
    except Exception:  # the broker is down: failures.tasks.record_missed_runs records it later
        log.warning("could not queue the failure record of job %s; the sweep will", job.pk, exc_info=True)
