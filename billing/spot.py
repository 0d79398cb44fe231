"""What a spot run is billed for (billing/actions/charging.py asks this for a record of the spot QOS).

A spot run pays, second by second, its GPU type's price on the rate card in force at its start
times that card's share for the window the second fell in (plans/spot.py: night 22:00-06:00 or
day, in the billing zone); its GPU memory likewise. Its NVMe is billed as any run's. It takes
neither the plan's included hours nor credits: those are for the plan's own jobs at the plan's
price, and spot is already cheaper.

A preempted run (slurmdbd state PREEMPTED) was given SPOT_GRACE_SECONDS of notice at its end to
checkpoint. Those last seconds are not billed when the pool itself took the GPUs back (a
reservation's or a maintenance window's start, a node drained); when a job took them, anyone's
job outside the spot QOS that started on the run's nodes from the start of its notice to a minute
after its end, the notice is billed like any second. The portal cannot tell a user's second
account from a stranger, so a waiver for "somebody else's" job was free GPU time for anyone with
two accounts.

Money: the charge split (billing/charge_split.py) prices the billed seconds this module finds;
nothing here computes an amount.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings

from billing.models import UsageRecord
from cluster.records.hostlist import HostlistError, expand_hostlist
from jobs.models import Job
from plans.spot import seconds_by_window

# Slurm's state of a run that preemption ended (sacct; seen on 24.11 with PreemptMode=REQUEUE).
PREEMPTED = "PREEMPTED"
# How long after a preempted run ended its preemptor may have started (Slurm's scheduling pass).
PREEMPTOR_SLACK = timedelta(minutes=1)


def is_spot(record: UsageRecord) -> bool:
    return bool(settings.SPOT_QOS) and record.qos == settings.SPOT_QOS


def _nodes(text: str) -> set[str] | None:
    """A Slurm host list's node names ("gpu-a100-[01-02]" is two); None when it is not one."""
    try:
        return set(expand_hostlist(text))
    except HostlistError:
        return None


def preempted_by_a_job(record: UsageRecord, grace: int) -> bool:
    """A job that is not spot, anyone's, started on the run's nodes while its notice ran: the
    run gave its GPUs to another job, not to the pool itself."""
    if not record.job_id:
        return True  # a run the portal cannot place: no waiver rather than a guess
    # The job's nodes now (empty again once it is requeued and waits): where not known, any job
    # started in the notice counts.
    nodes = _nodes(Job.objects.filter(pk=record.job_id).values_list("nodes", flat=True).first() or "")
    starts = record.run_end - timedelta(seconds=grace)
    candidates = (
        Job.objects.filter(start_time__gte=starts, start_time__lte=record.run_end + PREEMPTOR_SLACK)
        .exclude(qos=settings.SPOT_QOS)
        .exclude(pk=record.job_id)
        .values_list("nodes", flat=True)
    )
    # A node list that cannot be read could be any node: it counts as the run's.
    return any(not nodes or other is None or other & nodes for other in map(_nodes, candidates))


def unbilled_grace_seconds(record: UsageRecord) -> int:
    if record.state != PREEMPTED:
        return 0
    grace = min(settings.SPOT_GRACE_SECONDS, record.seconds)
    return 0 if grace == 0 or preempted_by_a_job(record, grace) else grace


def spot_seconds(start, billed_seconds: int) -> dict[str, int]:
    """The billed seconds of a spot run from `start`, per window ({"night": s, "day": s}): the
    charge split (billing/charge_split.py) prices each window's seconds at its share."""
    # Whole seconds from a whole second (slurmdbd's are): a fraction at a window's boundary would
    # be lost in each window's count, and the windows would not add up to the billed seconds.
    start = start.replace(microsecond=0)
    return seconds_by_window(start, start + timedelta(seconds=billed_seconds))
