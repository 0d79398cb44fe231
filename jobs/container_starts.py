"""How long a job's container took to start: the two timestamps the pyxis batch script writes to
the job's stderr (jobs/submission/batch_script.py), read once the job has ended, kept as a
`ContainerStart` row. The first start of an image on a node (squashfuse mounting a freshly
prewarmed file, or a pull where the node had no copy) shows on Console → Images beside the
usual start.

The stderr file is the job's to write: it is read from the front, bounded, never through a
link (jobs.logs). A job could print a fake pair of lines; it would only misstate its own
start time, so a value outside [0, 1 day] is dropped and nothing else depends on it.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from decimal import Decimal

from jobs.logs import local_log_path, read_head
from jobs.models import FINAL_STATES, ContainerStart, Job
from jobs.submission.batch_script import CONTAINER_LAUNCH, CONTAINER_STARTED

HEAD_BYTES = 16 * 1024
MAX_SECONDS = 86400
_STAMP = r" ([0-9]{9,11}[.,][0-9]{1,9})$"
_LAUNCH = re.compile("^" + re.escape(CONTAINER_LAUNCH) + _STAMP, re.M)
_STARTED = re.compile("^" + re.escape(CONTAINER_STARTED) + _STAMP, re.M)


def _stamp(match: re.Match[str]) -> Decimal:
    return Decimal(match[1].replace(",", "."))  # $EPOCHREALTIME follows the locale's decimal point


def _container_start(text: str) -> tuple[Decimal, Decimal] | None:
    """(launch epoch, seconds to the first instruction inside), or None."""
    launch, started = _LAUNCH.search(text), _STARTED.search(text)
    if not launch or not started:
        return None
    seconds = _stamp(started) - _stamp(launch)
    if not 0 <= seconds <= MAX_SECONDS:
        return None
    return _stamp(launch), seconds


def parse_container_start(text: str) -> float | None:
    """Seconds from launch to the first instruction inside the container, or None."""
    found = _container_start(text)
    return None if found is None else float(found[1])


def record_container_start(job_pk: int) -> ContainerStart | None:
    """Idempotent: one row per job, made only from an ended portal job's own stderr."""
    job = Job.objects.filter(pk=job_pk).first()
    if job is None or job.state not in FINAL_STATES or not job.image or not job.spec:
        return None
    existing = ContainerStart.objects.filter(job=job).first()
    if existing is not None:
        return existing
    found = _container_start(read_head(local_log_path(job.standard_error, job.cluster_user), HEAD_BYTES))
    if found is None:
        return None
    launch, seconds = found
    row, _ = ContainerStart.objects.get_or_create(
        job=job,
        defaults={
            "image": job.image,
            "node": job.nodes.split(",")[0],
            "seconds": seconds.quantize(Decimal("0.001")),
            "launched_at": datetime.fromtimestamp(float(launch), tz=UTC),
        },
    )
    return row
