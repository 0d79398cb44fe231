"""A sweep task's metric, read once the task has ended: `metrics.json` in its directory (an
object; the sweep's metric name is looked up in it), else the last line of its output that reads
`GPUPOOL_METRIC <name>=<number>`.

Both files are written by the user's job, so they are hostile: opened without following
symlinks, only when they are regular files owned by the job's user (jobs/logs.py), and read
to a bound."""

from __future__ import annotations

import json
import logging
import math
import re
from pathlib import PurePosixPath

from celery import shared_task

from jobs.logs import local_log_path, read_head, read_tail
from jobs.models import FINAL_STATES, Job, Sweep

log = logging.getLogger(__name__)
METRICS_FILE = "metrics.json"
MAX_METRICS_BYTES = 64 * 1024
MAX_OUTPUT_TAIL_BYTES = 64 * 1024
METRIC_LINE = "GPUPOOL_METRIC "
_LINE_RE = re.compile(r"GPUPOOL_METRIC ([A-Za-z_][A-Za-z0-9_.-]{0,63})=(\S{1,64})")


def _number(value) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def metric_from_json(text: str, name: str) -> float | None:
    try:
        data = json.loads(text)
    except ValueError:
        return None
    return _number(data.get(name)) if isinstance(data, dict) else None


def metric_from_output(text: str, name: str) -> float | None:
    found = None
    for match in _LINE_RE.finditer(text):
        if match[1] == name:
            found = _number(match[2])
    return found


def read_task_metric(task: Job, name: str) -> float | None:
    directory = PurePosixPath(task.standard_output).parent if task.standard_output else None
    if directory is not None:
        path = local_log_path(str(directory / METRICS_FILE), task.cluster_user)
        text = read_head(path, MAX_METRICS_BYTES)
        if text:
            value = metric_from_json(text, name)
            if value is not None:
                return value
    tail = read_tail(local_log_path(task.standard_output, task.cluster_user), MAX_OUTPUT_TAIL_BYTES)
    return metric_from_output(tail.text, name)


# The name queued messages carried while sweeps lived in jobs/sweeps/ (sweeps/submit.py says why).
@shared_task(ignore_result=True, name="jobs.sweeps.metrics.collect_metrics")
def collect_metrics(sweep_pk: int) -> int:
    """Read the metric of the sweep's ended tasks that have none yet. Idempotent."""
    sweep = Sweep.objects.filter(pk=sweep_pk).exclude(metric_name="").first()
    if sweep is None:
        return 0
    found = 0
    for task in Job.objects.filter(sweep=sweep, state__in=FINAL_STATES, metric__isnull=True)[:2000]:
        value = read_task_metric(task, sweep.metric_name)
        if value is not None:
            found += Job.objects.filter(pk=task.pk, metric__isnull=True).update(metric=value)
    return found


def collect_metrics_soon(array_pk: int) -> None:
    """After tasks of an array ended: their metrics are read by a worker, off the mirror's pass."""
    sweep_pk = Sweep.objects.filter(arrays__pk=array_pk).exclude(metric_name="").values_list("pk", flat=True).first()
    if sweep_pk is None:
        return
    try:
        collect_metrics.delay(sweep_pk)
    except Exception as exc:  # the broker is down: the sweep page asks again
        log.warning("could not queue the metrics of sweep %s: %s", sweep_pk, exc)
