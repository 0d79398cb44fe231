"""Capacity per node and request validation, without the cluster."""

from datetime import UTC, datetime, timedelta

import pytest

from cluster.models import Node
from cluster.records.types import Reservation as SlurmReservation
from conftest import subscribe
from reservations import actions
from reservations.capacity import availability, nearest_free_starts
from reservations.models import Reservation, State

pytestmark = pytest.mark.django_db
T0 = datetime(2026, 12, 10, 10, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _no_maintenance_holds(monkeypatch):
    """Slurm's own holds are read live; these tests give their own or none."""
    monkeypatch.setattr(actions, "maintenance_holds", lambda: [])


@pytest.fixture
def a100_nodes(db):
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    Node.objects.create(name="gpu-h100-01", state="IDLE", gpus=[{"type": "h100", "count": 2, "used_indexes": []}])


def _held(user, start, hours, count, nodes="", state=State.APPROVED):
    return Reservation.objects.create(
        user=user, gpu_type="a100", gpu_count=count, start=start, end=start + timedelta(hours=hours),
        purpose="x", state=state, nodes=nodes,
    )  # fmt: skip


def test_free_gpus_count_only_overlapping_held_reservations(alice, a100_nodes):
    _held(alice, T0, 2, 3, nodes="gpu-a100-01")
    _held(alice, T0 + timedelta(hours=2), 1, 4)  # starts as the window ends: no overlap
    _held(alice, T0, 2, 4, state=State.REQUESTED)  # not promised yet
    free = availability("a100", T0, T0 + timedelta(hours=2))
    # 3 GPUs of gpu-a100-01 take its cores, so its fourth GPU is nobody's either.
    assert (free.capacity, free.free) == (8, 4)
    assert free.per_node_free == {"gpu-a100-01": 0, "gpu-a100-02": 4}


def test_a_one_gpu_reservation_takes_its_whole_node_as_slurm_does(alice, a100_nodes):
    _held(alice, T0, 2, 1)  # nodes not read back yet: counted on the node with most room
    free = availability("a100", T0, T0 + timedelta(hours=1))
    assert free.free == 4 and sorted(free.per_node_free.values()) == [0, 4]
    _held(alice, T0, 2, 1)
    assert availability("a100", T0, T0 + timedelta(hours=1)).free == 0  # two 1-GPU holds, two nodes


def test_a_maintenance_hold_takes_its_whole_node():
    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    hold = SlurmReservation("gpureset_1", (), "gpu-a100-01", T0, T0 + timedelta(hours=2), "cpu=16", ("MAINT",))
    assert availability("a100", T0, T0 + timedelta(hours=1), maintenance=[hold]).free == 0
    later = T0 + timedelta(hours=3)
    assert availability("a100", later, later + timedelta(hours=1), maintenance=[hold]).free == 4


def test_nearest_free_starts_follow_the_grid(alice, a100_nodes):
    _held(alice, T0, 1, 8)
    step, horizon = timedelta(minutes=15), timedelta(hours=3)
    starts = nearest_free_starts("a100", 2, T0, timedelta(hours=1), step=step, horizon=horizon)
    assert starts == [T0 + timedelta(hours=1), T0 + timedelta(minutes=75), T0 + timedelta(minutes=90)]


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"start": T0.replace(minute=7)}, "start"),
        ({"start": T0.replace(tzinfo=None)}, "start"),
        ({"gpu_count": 9}, "gpu_count"),
        ({"gpu_type": "tpu"}, "gpu_type"),
        ({"duration_minutes": 20}, "duration_minutes"),
        ({"purpose": "  "}, "purpose"),
        ({"member_usernames": ("nobody-here",)}, "members"),
    ],
)
def test_bad_requests_name_the_field_and_create_nothing(alice, a100_nodes, changes, field, time_machine):
    time_machine.move_to(T0 - timedelta(days=1))
    subscribe(alice, "enterprise")
    fields = {"gpu_type": "a100", "gpu_count": 2, "start": T0, "duration_minutes": 120, "purpose": "x", **changes}
    with pytest.raises(actions.ReservationError) as refused:
        actions.request(alice, actions.RequestData(**fields))
    assert field in refused.value.errors
    assert not Reservation.objects.exists()


def test_the_free_plan_may_not_reserve_and_a_full_slot_suggests_others(alice, bob, a100_nodes, time_machine):
    time_machine.move_to(T0 - timedelta(days=1))
    subscribe(alice, "free")
    with pytest.raises(actions.ReservationError) as refused:
        actions.request(alice, actions.RequestData("a100", 1, T0, 60, "x"))
    assert "does not include reservations" in refused.value.errors["gpu_type"][0]
    subscribe(bob, "enterprise")
    _held(alice, T0, 1, 8)
    with pytest.raises(actions.ReservationError) as full:
        actions.request(bob, actions.RequestData("a100", 4, T0, 60, "x"))
    assert full.value.suggestions[0] == T0 + timedelta(hours=1)
