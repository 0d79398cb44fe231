"""A reservation its owner's plan no longer allows is withdrawn when the plan changes: a
reservation granted to Enterprise does not wait for a Free account (reservations/receivers.py)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from accounts.actions.lifecycle import change_plan
from conftest import subscribe
from reservations.models import Reservation, ReservationEvent, State

pytestmark = pytest.mark.django_db(transaction=True)


def _reservation(user, hours, state=State.REQUESTED, starts_in=timedelta(days=1)):
    start = timezone.now() + starts_in
    return Reservation.objects.create(
        user=user, gpu_type="a100", gpu_count=1, start=start, end=start + timedelta(hours=hours), purpose="x",
        state=state,
    )  # fmt: skip


def test_leaving_for_a_plan_without_reservations_withdraws_them_and_says_why(bob, eager_tasks):
    subscribe(bob, "enterprise")
    waiting = _reservation(bob, hours=2)
    started = _reservation(bob, hours=2, state=State.ACTIVE, starts_in=timedelta(hours=-1))
    change_plan(bob, "free", reason="test")
    waiting.refresh_from_db()
    started.refresh_from_db()
    assert waiting.state == State.CANCELLED and started.state == State.ACTIVE
    event = ReservationEvent.objects.get(reservation=waiting, to_state=State.CANCELLED)
    assert "Free" in event.reason and "no reservations" in event.reason
    assert any("is now CANCELLED" in message.body or "cancelled" in message.body for message in mail.outbox)


def test_a_plan_that_still_allows_it_keeps_it_and_a_longer_one_is_withdrawn(bob, eager_tasks):
    subscribe(bob, "enterprise")
    short, long = _reservation(bob, hours=2), _reservation(bob, hours=12)  # Pro: at most 8 h
    change_plan(bob, "pro", reason="test")
    short.refresh_from_db()
    long.refresh_from_db()
    assert (short.state, long.state) == (State.REQUESTED, State.CANCELLED)
