"""Pricing a spot run (billing/charging.py calls `spot_amounts` for a record of the spot QOS).

A spot run pays, second by second, its GPU type's price on the rate card in force at its start
times that card's share for the window the second fell in (plans/spot.py: night 22:00-06:00 or
day, in the billing zone); its GPU memory likewise. Its NVMe is billed as any run's. It takes
neither the plan's included hours nor credits: those are for the plan's own jobs at the plan's
price, and spot is already cheaper.

A preempted run (slurmdbd state PREEMPTED) was given SPOT_GRACE_SECONDS of notice at its end to
checkpoint: those last seconds are not billed. Unless the preempting job was the owner's own:
a job of the owner's outside the spot QOS that started on the run's nodes from the start of
its notice to a minute after its end voids the waiver, so nobody earns free GPU time by
preempting themselves.

Money: exact Decimal products; the memory share is one division carried to 12 places (as
every share in charging.py), and invoices round once (billing/pricing.py rule 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

from django.conf import settings

from billing.models import UsageRecord
from billing.pricing import SECONDS_PER_HOUR, Rates, divide
from cluster.hostlist import HostlistError, expand_hostlist
from jobs.models import Job
from plans.spot import seconds_by_window

# Slurm's state of a run that preemption ended (sacct; seen on 24.11 with PreemptMode=REQUEUE).
PREEMPTED = "PREEMPTED"
ZERO = Decimal(0)
# How long after a preempted run ended its preemptor may have started (Slurm's scheduling pass).
PREEMPTOR_SLACK = timedelta(minutes=1)


def is_spot(record: UsageRecord) -> bool:
    return bool(settings.SPOT_QOS) and record.qos == settings.SPOT_QOS


@dataclass(frozen=True)
class SpotAmounts:
    billable_gpu_seconds: int
    unbilled_grace_gpu_seconds: int
    amount_gpu: Decimal
    amount_memory: Decimal
    amount_nvme: Decimal
    note: str


def _nodes(text: str) -> set[str] | None:
    """A Slurm host list's node names ("gpu-a100-[01-02]" is two); None when it is not one."""
    try:
        return set(expand_hostlist(text))
    except HostlistError:
        return None


def self_preempted(record: UsageRecord, grace: int) -> bool:
    """A job of the owner's, not spot, started on the run's nodes while its notice ran."""
    if not record.job_id:
        return True  # a run the portal cannot place: no waiver rather than a guess
    # The job's nodes now (empty again once it is requeued and waits): where not known, any job
    # of the owner's started in the notice counts.
    nodes = _nodes(Job.objects.filter(pk=record.job_id).values_list("nodes", flat=True).first() or "")
    starts = record.run_end - timedelta(seconds=grace)
    candidates = (
        Job.objects.filter(
            owner_id=record.user_id, start_time__gte=starts, start_time__lte=record.run_end + PREEMPTOR_SLACK
        )
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
    return 0 if grace == 0 or self_preempted(record, grace) else grace


def weighted_seconds(rates: Rates, gpu_type: str, start, seconds: int) -> tuple[Decimal, dict[str, int]]:
    """The sum of seconds x share over the windows `seconds` from `start` fell in (what a spot
    run pays of one GPU's price is this x the price), and the seconds per window."""
    windows = seconds_by_window(start, start + timedelta(seconds=seconds))
    weighted = sum(
        (Decimal(count) * rates.spot_multiplier(gpu_type, window) for window, count in windows.items()), ZERO
    )
    return weighted, windows


def spot_amounts(record: UsageRecord, rates: Rates, *, included_nvme_gb: int) -> SpotAmounts:
    """Raises PricingError (no price for the GPU type) like any pricing."""
    grace = unbilled_grace_seconds(record)
    billed_seconds = record.seconds - grace
    weighted, windows = weighted_seconds(rates, record.gpu_type, record.run_start, billed_seconds)
    amount_gpu = ZERO
    if record.gpu_count:
        amount_gpu = record.gpu_count * weighted * rates.gpu_price(record.gpu_type)
    memory = record.gpu_memory_gb_seconds * rates.gpu_memory_gb_second
    amount_memory = divide(memory * weighted, record.seconds) if record.seconds else ZERO
    nvme_gb = max(0, record.nvme_gb - included_nvme_gb)
    amount_nvme = divide(Decimal(nvme_gb * billed_seconds) * rates.nvme_gb_hour, SECONDS_PER_HOUR)
    shares = ", ".join(
        f"{window} x{rates.spot_multiplier(record.gpu_type, window)} for {seconds} s"
        for window, seconds in windows.items()
        if seconds
    )
    note = f"spot: {shares or 'no billed time'}" + (
        f"; last {grace} s (notice before preemption) not billed" if grace else ""
    )
    return SpotAmounts(
        billable_gpu_seconds=record.gpu_count * billed_seconds,
        unbilled_grace_gpu_seconds=record.gpu_count * grace,
        amount_gpu=amount_gpu,
        amount_memory=amount_memory,
        amount_nvme=amount_nvme,
        note=note[:200],
    )
