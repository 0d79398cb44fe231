"""Reservations on the real dev cluster: approval makes Slurm hold the GPUs for the user,
their jobs run in it and nobody else's, cancel and rejection leave nothing behind, a Slurm
refusal fails the request with Slurm's words, and the drift check sees a hand-made change."""

import threading
from datetime import timedelta

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import slurm_cli
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import SlurmRequestError
from conftest import subscribe
from jobs import actions as job_actions
from jobs.models import Job
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tasks import submit_claimed
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from reservations import actions
from reservations.models import Reservation, State
from testing.slurm import submission, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _tomorrow_at(hour: int):
    return (timezone.now() + timedelta(days=1)).replace(hour=hour, minute=0, second=0, microsecond=0)


def _row(user, *, start, minutes=120, gpu_type="a100", count=2) -> Reservation:
    # Made directly: the tests choose windows (seconds away) that the request form would not.
    return Reservation.objects.create(
        user=user, gpu_type=gpu_type, gpu_count=count, start=start, end=start + timedelta(minutes=minutes),
        purpose="test",
    )  # fmt: skip


@pytest.fixture
def enterprise_alice(alice, provision, slurm):
    mirror_nodes(slurm)  # capacity comes from the node mirror
    subscribe(alice, "enterprise")
    return provision(alice).cluster_username


def test_approval_holds_the_gpus_for_the_user_and_cancel_releases_them(alice, admin_user, enterprise_alice, cleanup):
    reservation = actions.request(
        alice, actions.RequestData("a100", 2, _tomorrow_at(10), 120, "fine-tuning, the seed's example")
    )
    cleanup.append(reservation.slurm_reservation_name())
    approved = actions.approve(reservation.pk, admin_user)
    assert approved.state == State.APPROVED, approved.error
    held = slurm_cli().show_reservation(approved.slurm_name)
    assert held is not None and "gres/gpu:a100=2" in held.tres
    assert held.users == (enterprise_alice,)
    assert (held.start_time, held.end_time) == (reservation.start, reservation.end)
    assert approved.nodes and approved.nodes == held.nodes

    actions.cancel(reservation.pk, alice)
    assert slurm_cli().show_reservation(approved.slurm_name) is None
    assert Reservation.objects.get(pk=reservation.pk).state == State.CANCELLED
    assert [event.to_state for event in reservation.events.order_by("created_at", "id")] == [
        "requested", "approved", "cancelled",
    ]  # fmt: skip


def test_a_job_runs_in_the_reservation_and_another_users_job_is_refused(
    alice, bob, admin_user, enterprise_alice, provision, slurm, cleanup
):
    start = timezone.now().replace(microsecond=0) + timedelta(seconds=5)
    reservation = _row(alice, start=start, minutes=10, gpu_type="rtx4090", count=1)
    cleanup.append(reservation.slurm_reservation_name())
    approved = actions.approve(reservation.pk, admin_user)
    assert approved.state == State.APPROVED, approved.error

    spec = parse_job_spec(
        {**GOOD_SPEC, "gpu_type": "rtx4090", "time_limit_minutes": 5, "command": "echo in the reservation"},
        plan=plan_for(alice), policy=SpecPolicy.from_settings(),
    )  # fmt: skip
    job = job_actions.submit(alice, spec, reservation_id=reservation.pk)
    # In Slurm already when submit returns (the inline path), else the worker's attempt puts it there.
    assert submit_claimed(job.pk) in {"submitted", "not-claimable"}
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    in_slurm = wait_for_state(slurm, job.slurm_job_id, {"RUNNING", "COMPLETED"}, timeout=60)
    assert in_slurm.nodes in approved.nodes

    bob_name = provision(bob).cluster_username
    with pytest.raises(SlurmRequestError) as refused:
        slurm.as_user(bob_name).submit_job(
            submission("true", tres_per_node="gres/gpu:rtx4090:1", reservation=approved.slurm_name)
        )
    assert refused.value.error_number == 2052  # "Access denied to requested reservation"


def test_a_job_longer_than_its_reservation_is_refused_before_slurm(alice, admin_user, enterprise_alice, cleanup):
    from jobs.submission.spec import SpecError

    start = timezone.now().replace(microsecond=0) + timedelta(seconds=30)
    reservation = _row(alice, start=start, minutes=10, gpu_type="a100", count=1)
    cleanup.append(reservation.slurm_reservation_name())
    actions.approve(reservation.pk, admin_user)
    spec = parse_job_spec(
        {**GOOD_SPEC, "time_limit_minutes": 30}, plan=plan_for(alice), policy=SpecPolicy.from_settings()
    )
    with pytest.raises(SpecError) as refused:
        job_actions.submit(alice, spec, reservation_id=reservation.pk)
    assert "at most 10 minutes" in refused.value.errors["reservation"][0]
    assert not Job.objects.filter(owner=alice).exists()


def test_a_rejected_request_creates_nothing_in_slurm(alice, admin_user, enterprise_alice):
    reservation = actions.request(alice, actions.RequestData("a100", 1, _tomorrow_at(12), 60, "test"))
    actions.reject(reservation.pk, admin_user, "the pool is booked for a course")
    assert slurm_cli().show_reservation(reservation.slurm_reservation_name()) is None
    assert Reservation.objects.get(pk=reservation.pk).state == State.REJECTED


def test_a_slurm_side_overlap_fails_the_approval_with_slurms_words(alice, admin_user, enterprise_alice, cleanup):
    start = _tomorrow_at(14)
    cli = slurm_cli()
    cleanup.append("byhand_h100")
    cli.create_gpu_reservation(
        GpuReservationRequest(
            "byhand_h100", gpu_type="h100", count=2, users=[enterprise_alice], start=start, duration_minutes=60
        )
    )
    reservation = actions.request(alice, actions.RequestData("h100", 2, start, 60, "test"))
    cleanup.append(reservation.slurm_reservation_name())
    failed = actions.approve(reservation.pk, admin_user)
    assert failed.state == State.FAILED
    assert "busy" in failed.error.lower() or "Slurm refused" in failed.error
    assert cli.show_reservation(reservation.slurm_reservation_name()) is None


def test_the_drift_check_sees_a_reservation_deleted_by_hand_and_repairs_it(
    alice, admin_user, enterprise_alice, capsys, cleanup
):
    reservation = actions.request(alice, actions.RequestData("a100", 1, _tomorrow_at(16), 60, "test"))
    cleanup.append(reservation.slurm_reservation_name())
    approved = actions.approve(reservation.pk, admin_user)
    call_command("reservations_check")
    slurm_cli().delete_reservation(approved.slurm_name)
    with pytest.raises(CommandError, match="difference"):
        call_command("reservations_check")
    assert f"{approved.slurm_name}: missing in Slurm" in capsys.readouterr().out
    call_command("reservations_check", "--sync")
    call_command("reservations_check")
    assert slurm_cli().show_reservation(approved.slurm_name) is not None


def test_two_admins_approving_at_once_never_overcommit(alice, bob, admin_user, settings, enterprise_alice, provision):
    """Two requests that each fit but not together, approved at the same moment from two
    connections: the per-type lock lets one through (Slurm itself is not asked: noop)."""
    settings.SLURM_CLI_NOOP = True
    subscribe(bob, "enterprise")
    provision(bob)
    start = _tomorrow_at(18)
    first = _row(alice, start=start, gpu_type="h100", count=2)
    second = _row(bob, start=start + timedelta(minutes=30), gpu_type="h100", count=2)
    results, barrier = {}, threading.Barrier(2)

    def approve(pk):
        barrier.wait()
        try:
            results[pk] = actions.approve(pk, admin_user).state
        finally:
            connection.close()

    threads = [threading.Thread(target=approve, args=(pk,)) for pk in (first.pk, second.pk)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results.values()) == [State.APPROVED, State.FAILED]
