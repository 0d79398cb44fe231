"""The reservations API against the real dev cluster: a request made over the API, approved
by an admin over the API, is held by Slurm for the user's cluster account; cancelled over
the API, it is gone from Slurm."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import slurm_cli
from conftest import subscribe
from reservations.models import Reservation, State

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

URL = "/api/v1/reservations/"


def test_an_approval_over_the_api_holds_the_gpus_and_a_cancel_releases_them(
    alice, admin_user, provision, slurm, api_client_for, cleanup
):
    mirror_nodes(slurm)  # capacity comes from the node mirror
    subscribe(alice, "enterprise")
    account = provision(alice).cluster_username
    # Two days ahead at 15:00: another test's "tomorrow 10:00" on the same cluster may hold
    # A100s then; eight A100s hold several of these anyway.
    start = datetime.combine(timezone.now().date() + timedelta(days=2), time(15), tzinfo=UTC)
    owner = api_client_for(alice)

    created = owner.post(
        URL,
        {"gpu_type": "a100", "gpu_count": 2, "start": start.isoformat(), "duration_minutes": 120, "purpose": "api"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    pk = created.json()["id"]
    cleanup.append(Reservation.objects.get(pk=pk).slurm_reservation_name())

    approved = api_client_for(admin_user).post(f"{URL}{pk}/approve")

    assert approved.status_code == 200
    data = approved.json()
    assert data["state"] == "approved", data["error"]
    held = slurm_cli().show_reservation(data["slurm_name"])
    assert held is not None and "gres/gpu:a100=2" in held.tres
    assert held.users == (account,)
    assert (held.start_time, held.end_time) == (start, start + timedelta(minutes=120))
    assert data["nodes"] and data["nodes"] == held.nodes
    assert [event["actor"] for event in data["events"]] == ["alice", "ada"]

    cancelled = owner.post(f"{URL}{pk}/cancel")

    assert cancelled.status_code == 200 and cancelled.json()["state"] == "cancelled"
    assert slurm_cli().show_reservation(data["slurm_name"]) is None
    assert Reservation.objects.get(pk=pk).state == State.CANCELLED
