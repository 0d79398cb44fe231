"""The clock moves reservations on once; drift is recorded where admins see it."""

from datetime import UTC, datetime, timedelta

import pytest
from django.core import mail

from cluster.models import SyncRun
from reservations import actions, reconcile
from reservations.models import Reservation, State
from reservations.tasks import check_reservations

pytestmark = pytest.mark.django_db(transaction=True)
T0 = datetime(2026, 12, 10, 10, 0, tzinfo=UTC)


def test_approved_becomes_active_at_the_start_and_finished_at_the_end_once(alice):
    reservation = Reservation.objects.create(
        user=alice, gpu_type="a100", gpu_count=1, start=T0, end=T0 + timedelta(hours=1), purpose="x",
        state=State.APPROVED,
    )  # fmt: skip
    assert actions.advance(now=T0 - timedelta(minutes=1)) == 0
    assert actions.advance(now=T0) == 1
    assert actions.advance(now=T0 + timedelta(minutes=1)) == 0
    assert Reservation.objects.get(pk=reservation.pk).state == State.ACTIVE
    assert actions.advance(now=T0 + timedelta(hours=1)) == 1
    assert Reservation.objects.get(pk=reservation.pk).state == State.FINISHED
    assert [event.to_state for event in reservation.events.order_by("id")] == ["active", "finished"]
    assert [message.subject for message in mail.outbox] == [
        f"Reservation #{reservation.pk}: active", f"Reservation #{reservation.pk}: finished",
    ]  # fmt: skip


def test_drift_is_recorded_on_the_sync_run_the_console_shows(monkeypatch):
    drift = [reconcile.Drift("gpupool_r7", "missing in Slurm", "reservation #7 is approved", 7)]
    monkeypatch.setattr(reconcile, "check", lambda: drift)
    assert check_reservations.run() == 1
    assert "gpupool_r7: missing in Slurm" in SyncRun.objects.get(name="reservations").last_error
    monkeypatch.setattr(reconcile, "check", lambda: [])
    assert check_reservations.run() == 0
    run = SyncRun.objects.get(name="reservations")
    assert run.last_error == "" and run.summary == "portal and Slurm agree"
