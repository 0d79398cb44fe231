"""What sweeps do when the jobs below them change: an array's tasks ended, so the sweep's metric
is read (jobs.signals.array_tasks_ended, sent by the mirror after its commit)."""

from __future__ import annotations

from django.dispatch import receiver

from jobs.signals import array_tasks_ended
from sweeps.metrics import collect_metrics_soon


@receiver(array_tasks_ended)
def read_the_metrics_of_ended_tasks(sender, array_pk: int, **kwargs) -> None:
    collect_metrics_soon(array_pk)
