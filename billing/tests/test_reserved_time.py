"""Reserved GPU time is billed once (billing/actions/reserved_time.py): its jobs as any job, the time
they leave unused as GPU time of its own. A reservation used to cost nothing."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.actions.reserved_time import RESERVATION_CLUSTER, meter_reservations
from billing.models import UsageRecord
from conftest import subscribe
from jobs.models import Job, JobState
from reservations.models import Reservation, State

pytestmark = pytest.mark.django_db


def _reservation(user, *, start, hours=1, count=2, state=State.FINISHED):
    return Reservation.objects.create(
        user=user, gpu_type="a100", gpu_count=count, start=start, end=start + timedelta(hours=hours),
        purpose="fine-tuning", state=state,
    )  # fmt: skip


def test_the_unused_part_of_a_reservation_is_billed_once_at_the_plans_price(bob):
    subscribe(bob, "enterprise")  # A100 at $0.0025 a GPU-second, nothing included
    start = timezone.now() - timedelta(hours=3)
    held = _reservation(bob, start=start)  # 2 A100 x 1 h = 7,200 GPU-seconds
    Job.objects.create(
        owner=bob, reservation=held, state=JobState.COMPLETED, gpu_type="a100", tres_per_node="gres/gpu:a100:1",
        start_time=start + timedelta(minutes=10), end_time=start + timedelta(minutes=40),  # 1,800 used
    )  # fmt: skip
    assert meter_reservations() == 1
    record = UsageRecord.objects.get(cluster=RESERVATION_CLUSTER, slurm_job_id=held.pk)
    assert record.gpu_seconds == 7200 - 1800 and record.invoice_id is not None
    assert record.plan == "enterprise" and record.amount == Decimal("5400") * Decimal("0.0025")
    assert meter_reservations() == 0  # once
    assert UsageRecord.objects.filter(cluster=RESERVATION_CLUSTER).count() == 1


def test_included_hours_cover_reserved_time_first(alice):
    start = timezone.now() - timedelta(hours=3)
    _reservation(alice, start=start, count=1)  # Pro: 100 A100-hours included
    meter_reservations()
    record = UsageRecord.objects.get(cluster=RESERVATION_CLUSTER)
    assert (record.included_gpu_seconds, record.billable_gpu_seconds, record.amount) == (3600, 0, 0)


def test_not_before_it_ends_and_never_when_it_was_cancelled_or_rejected(bob):
    subscribe(bob, "enterprise")
    now = timezone.now()
    _reservation(bob, start=now - timedelta(minutes=30), state=State.ACTIVE)  # still running
    _reservation(bob, start=now - timedelta(hours=5), state=State.CANCELLED)
    _reservation(bob, start=now - timedelta(hours=5), state=State.REJECTED)
    _reservation(bob, start=now - timedelta(hours=1, minutes=5), state=State.FINISHED)  # within the grace
    assert meter_reservations() == 0
    assert not UsageRecord.objects.filter(cluster=RESERVATION_CLUSTER).exists()


def test_a_reservation_approved_on_a_paid_plan_is_paid_at_it_when_its_owner_leaves_before_the_window(bob):
    """The dodge: reserve on Enterprise, be on Free when the window starts: the held node was free."""
    import time_machine

    from reservations.models import ReservationEvent

    now = timezone.now()
    subscribe(bob, "enterprise")
    held = _reservation(bob, start=now + timedelta(minutes=10), hours=1, count=1)
    ReservationEvent.objects.create(reservation=held, from_state=State.REQUESTED, to_state=State.APPROVED)
    with time_machine.travel(now + timedelta(minutes=5), tick=False):
        subscribe(bob, "free")
    with time_machine.travel(now + timedelta(hours=2), tick=False):
        assert meter_reservations() == 1
    record = UsageRecord.objects.get(cluster=RESERVATION_CLUSTER, slurm_job_id=held.pk)
    assert record.plan == "enterprise" and record.amount == 3600 * Decimal("0.0025")
