"""Reserved GPU time is priced: the rule.

A reservation holds its GPUs (and in Slurm every core of their nodes) for its whole window,
whether or not its jobs use them, so the window is billed in full, once:
- jobs run inside it are metered and charged as any job (billing/usage/metering.py);
- what they leave unused, GPUs x the window's seconds minus the GPU-seconds of its jobs inside
  the window, is one usage record of its own (cluster "reservation", the reservation's id),
  charged like GPU time by the dearer of the plan held when an admin approved it and the plan
  held at its start (a reservation granted to a plan is paid at that plan's terms even when its
  owner leaves the plan before the window): the plan's included hours first, then credits, then
  the plan's GPU price (billing/actions/charging.py; the record's `plan` says which);
- a reservation cancelled, rejected or failed before its start costs nothing.
Why this rule: the pool cannot sell held GPUs to anyone else, and billing only the jobs would
make a reservation a free way to keep GPUs from others; billing the window on top of its jobs
would charge the used part twice.

`meter_reservations` runs on beat after the window has ended and RESERVATION_METERING_GRACE
has passed (the mirror has recorded its jobs' ends by then); the record's unique key makes it
exactly once, and charging it is idempotent as for any record.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.actions import charging
from billing.models import UsageRecord
from billing.models.usage import RESERVATION_CLUSTER
from jobs.models import Job
from reservations.models import Reservation, State

log = logging.getLogger(__name__)
UNUSED_NOTE = "reserved GPU time its jobs did not use"
RESERVATION_METERING_GRACE = timedelta(minutes=10)


def _overlap_seconds(start: datetime, end: datetime, window_start: datetime, window_end: datetime) -> int:
    return max(0, int((min(end, window_end) - max(start, window_start)).total_seconds()))


def used_gpu_seconds(reservation: Reservation, now: datetime) -> int:
    """GPU-seconds the reservation's jobs held inside its window (a job's own times, clipped)."""
    used = 0
    for job in Job.objects.filter(reservation=reservation, start_time__isnull=False):
        seconds = _overlap_seconds(job.start_time, job.end_time or now, reservation.start, reservation.end)
        used += seconds * (job.gpu_count or 0)
    return used


def unused_gpu_seconds(reservation: Reservation, now: datetime) -> int:
    reserved = reservation.gpu_count * int(reservation.duration.total_seconds())
    return max(0, reserved - used_gpu_seconds(reservation, now))


def meter_reservation(reservation: Reservation, now: datetime | None = None) -> UsageRecord | None:
    """The unused-time record of an ended reservation, written and charged once (a record of
    0 GPU-seconds when its jobs used all of it: metered all the same); None when it was
    metered already."""
    now = now or timezone.now()
    unused = unused_gpu_seconds(reservation, now)
    try:
        with transaction.atomic():
            record = UsageRecord.objects.create(
                cluster=RESERVATION_CLUSTER,
                slurm_job_id=reservation.pk,
                run_start=reservation.start,
                run_end=reservation.end,
                gpu_type=reservation.gpu_type,
                user_id=reservation.user_id,
                state="RESERVED",
                seconds=int(reservation.duration.total_seconds()),
                gpu_count=reservation.gpu_count,
                gpu_seconds=unused,
                gpu_memory_source=UsageRecord.MemorySource.RESERVED,
            )
    except IntegrityError:
        return None  # metered by another pass
    charging.charge(record.pk)
    UsageRecord.objects.filter(pk=record.pk).update(note=UNUSED_NOTE)
    record.refresh_from_db()
    return record


def due(now: datetime):
    """Reservations whose window ended at least the grace ago and whose unused time is not
    metered yet (held ones: approved or active, or finished)."""
    metered = UsageRecord.objects.filter(cluster=RESERVATION_CLUSTER).values("slurm_job_id")
    return (
        Reservation.objects.filter(
            state__in=(State.APPROVED, State.ACTIVE, State.FINISHED), end__lte=now - RESERVATION_METERING_GRACE
        )
        .exclude(pk__in=metered)
        .order_by("end", "id")
    )


def meter_reservations(now: datetime | None = None) -> int:
    """Beat: meter every ended reservation not metered yet; the number of records written."""
    now = now or timezone.now()
    written = 0
    for reservation in due(now)[:200]:
        try:
            written += meter_reservation(reservation, now) is not None
        except charging.ChargeError as exc:
            log.warning("reservation %s: unused time not charged yet: %s", reservation.pk, exc)
    return written
