"""/api/v1/reservations/, database only: the seed's example from the API, every field's
refusal, the plan's rule, who sees and does what (named people: the owner, a member, an
outsider, an admin), and the schema's six operations. The approval on the real cluster is
in test_api_cluster.py."""

from datetime import UTC, datetime, time, timedelta

import pytest
from django.utils import timezone

from cluster.models import Node
from conftest import subscribe
from reservations import actions
from reservations.models import Reservation, State

pytestmark = pytest.mark.django_db

URL = "/api/v1/reservations/"
OPERATIONS = {
    ("get", "/api/v1/reservations/"): "reservations_list",
    ("post", "/api/v1/reservations/"): "reservations_create",
    ("get", "/api/v1/reservations/{id}/"): "reservations_retrieve",
    ("post", "/api/v1/reservations/{id}/cancel"): "reservations_cancel",
    ("post", "/api/v1/reservations/{id}/approve"): "reservations_approve",
    ("post", "/api/v1/reservations/{id}/reject"): "reservations_reject",
}


@pytest.fixture(autouse=True)
def pool(monkeypatch):
    """Two A100 nodes of four GPUs, and no maintenance hold (the real cluster's holds would
    make the figures depend on what else runs)."""
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    monkeypatch.setattr(actions, "maintenance_holds", lambda: [])


@pytest.fixture
def owner(alice):
    subscribe(alice, "enterprise")
    return alice


def tomorrow_at(hour: int) -> datetime:
    return datetime.combine(timezone.now().date() + timedelta(days=1), time(hour), tzinfo=UTC)


def body(**overrides) -> dict:
    # The seed's example: tomorrow 10:00, 2 A100, 2 hours.
    values = {
        "gpu_type": "a100",
        "gpu_count": 2,
        "start": tomorrow_at(10).isoformat(),
        "duration_minutes": 120,
        "purpose": "fine-tuning a 7B model",
    }
    return {**values, **overrides}


def row(user, *, state=State.REQUESTED, count=2, start=None, minutes=120, members=()) -> Reservation:
    start = start or tomorrow_at(10)
    reservation = Reservation.objects.create(
        user=user, gpu_type="a100", gpu_count=count, start=start, end=start + timedelta(minutes=minutes),
        purpose="fine-tuning", state=state,
    )  # fmt: skip
    reservation.members.set(members)
    return reservation


def post(client, path, data=None):
    return client.post(path, data, format="json")


# Requesting


def test_the_seeds_example_is_requested_from_the_api(owner, api_client_for):
    response = post(api_client_for(owner), URL, body())

    assert response.status_code == 201, response.json()
    data = response.json()
    reservation = Reservation.objects.get(pk=data["id"])
    assert reservation.user == owner and reservation.state == State.REQUESTED
    assert (reservation.start, reservation.end) == (tomorrow_at(10), tomorrow_at(12))
    assert data["state"] == "requested" and data["user"] == "alice"
    assert (data["gpu_type"], data["gpu_count"], data["duration_minutes"]) == ("a100", 2, 120)
    assert datetime.fromisoformat(data["start"]) == tomorrow_at(10)
    assert datetime.fromisoformat(data["end"]) == tomorrow_at(12)
    # Nothing in Slurm yet: null, not "".
    assert (data["slurm_name"], data["nodes"], data["error"]) == (None, None, None)
    assert data["cancellable"] is True
    assert [(e["actor"], e["from_state"], e["to_state"]) for e in data["events"]] == [("alice", None, "requested")]


def test_a_start_in_another_zone_is_the_same_moment(owner, api_client_for):
    start = tomorrow_at(10).astimezone(timezone.get_fixed_timezone(90))  # 11:30+01:30
    response = post(api_client_for(owner), URL, body(start=start.isoformat()))
    assert response.status_code == 201, response.json()
    assert Reservation.objects.get().start == tomorrow_at(10)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("gpu_type", "tpu"),
        ("gpu_count", "2"),  # a string is not a count over the API
        ("gpu_count", 0),
        ("gpu_count", 99),  # more than the plan's A100s
        ("start", "tomorrow at ten"),
        ("start", tomorrow_at(10).replace(tzinfo=None).isoformat()),  # no zone
        ("start", (tomorrow_at(10) - timedelta(days=2)).isoformat()),  # the past
        ("start", (tomorrow_at(10) + timedelta(minutes=7)).isoformat()),  # off the 15-minute grid
        ("start", (tomorrow_at(10) + timedelta(days=60)).isoformat()),  # beyond the horizon
        ("duration_minutes", 10),
        ("duration_minutes", 50),  # not a multiple of 15
        ("duration_minutes", 200 * 24 * 60),  # longer than the plan allows
        ("duration_minutes", 120.0),
        ("purpose", "   "),
        ("purpose", 42),
        ("members", ["nobody"]),
        ("members", "bob"),
    ],
)
def test_bad_input_is_named_by_field_and_creates_nothing(owner, api_client_for, field, value):
    response = post(api_client_for(owner), URL, body(**{field: value}))

    assert response.status_code == 400
    data = response.json()
    assert data["detail"].strip()
    assert list(data["errors"]) == [field], data
    assert all(isinstance(message, str) and message for message in data["errors"][field])
    assert not Reservation.objects.exists()


def test_a_missing_field_and_a_body_that_is_not_an_object_are_refused(owner, api_client_for):
    client = api_client_for(owner)
    values = body()
    del values["purpose"]
    assert post(client, URL, values).json()["errors"] == {"purpose": ["This field is required."]}
    response = post(client, URL, [body()])
    assert response.status_code == 400 and list(response.json()["errors"]) == ["non_field_errors"]
    # Form-encoded bodies are not read: JSON only, as the rest of the API.
    assert api_client_for(owner).post(URL, body(), format="multipart").status_code == 415
    assert not Reservation.objects.exists()


def test_a_taken_slot_is_refused_with_the_nearest_free_starts(owner, bob, api_client_for):
    # Bob's approved reservation holds all eight A100s from 10:00 to 12:00.
    row(bob, state=State.APPROVED, count=8)

    response = post(api_client_for(owner), URL, body())

    assert response.status_code == 400
    data = response.json()
    assert list(data["errors"]) == ["start"]
    # Two hours from 10:15 or 11:45 still overlap bob's: the first free start is his end.
    suggestions = [datetime.fromisoformat(moment) for moment in data["suggestions"]]
    assert suggestions[0] == tomorrow_at(12)
    assert suggestions == sorted(suggestions) and len(suggestions) == 3
    assert Reservation.objects.count() == 1


def test_the_free_plan_may_not_reserve(alice, api_client_for):
    subscribe(alice, "free")
    response = post(api_client_for(alice), URL, body())
    assert response.status_code == 400
    assert "Free plan does not include reservations" in " ".join(response.json()["errors"]["gpu_type"])
    assert not Reservation.objects.exists()


def test_members_are_recorded_by_username(owner, bob, api_client_for):
    bob.profile.cluster_username = "bob"
    bob.profile.save()
    response = post(api_client_for(owner), URL, body(members=["bob"]))
    assert response.status_code == 201, response.json()
    assert response.json()["members"] == ["bob"]
    assert list(Reservation.objects.get().members.all()) == [bob]


def test_without_a_token_nothing_is_answered(client):
    assert client.get(URL).status_code == 401
    response = client.post(URL, body(), content_type="application/json")
    assert response.status_code == 401 and response.json()["detail"]
    assert not Reservation.objects.exists()


# Reading


def test_the_list_holds_the_callers_own_and_those_they_are_a_member_of(alice, bob, admin_user, api_client_for):
    own = row(alice)
    shared = row(bob, start=tomorrow_at(14), members=[alice])
    row(bob, start=tomorrow_at(16))  # bob's alone: not alice's to see
    row(admin_user, start=tomorrow_at(18))

    data = api_client_for(alice).get(URL).json()

    # Latest window first.
    assert [item["id"] for item in data["results"]] == [shared.pk, own.pk]
    assert data["results"][0]["members"] == ["alice"] and data["results"][0]["user"] == "bob"
    # An admin's list is their own too (they read others' one by one).
    assert [item["id"] for item in api_client_for(admin_user).get(URL).json()["results"]] == [
        Reservation.objects.get(user=admin_user).pk
    ]


def test_the_list_pages_by_cursor(alice, api_client_for):
    rows = [row(alice, start=tomorrow_at(hour)) for hour in (8, 10, 12)]
    client = api_client_for(alice)
    first = client.get(URL, {"page_size": 2}).json()
    assert [item["id"] for item in first["results"]] == [rows[2].pk, rows[1].pk]
    second = client.get(first["next"]).json()
    assert [item["id"] for item in second["results"]] == [rows[0].pk] and second["next"] is None
    assert client.get(URL, {"page_size": 0}).status_code == 400
    assert client.get(URL, {"cursor": "not-ours"}).status_code == 404


def test_another_users_reservation_is_404_and_a_member_may_read_it(alice, bob, api_client_for):
    private = row(bob)
    shared = row(bob, start=tomorrow_at(14), members=[alice])
    client = api_client_for(alice)

    response = client.get(f"{URL}{private.pk}/")
    assert response.status_code == 404 and response.json()["detail"]
    assert client.get(f"{URL}{shared.pk}/").json()["user"] == "bob"
    # Without the trailing slash too, as the job API answers.
    assert client.get(f"{URL}{shared.pk}").status_code == 200
    # The same 404 for a reservation that does not exist at all.
    assert client.get(f"{URL}{private.pk + shared.pk + 100}/").status_code == 404


def test_the_events_say_who_when_and_why_oldest_first(owner, admin_user, api_client_for):
    reservation = actions.request(owner, actions.RequestData("a100", 2, tomorrow_at(10), 120, "fine-tuning"))
    actions.reject(reservation.pk, admin_user, "The nodes are in maintenance.")

    data = api_client_for(owner).get(f"{URL}{reservation.pk}/").json()

    assert data["state"] == "rejected"
    assert [(e["actor"], e["from_state"], e["to_state"], e["reason"]) for e in data["events"]] == [
        ("alice", None, "requested", ""),
        ("ada", "requested", "rejected", "The nodes are in maintenance."),
    ]
    assert data["cancellable"] is False


# Cancelling


def test_the_owner_cancels_and_a_second_cancel_is_409(alice, api_client_for):
    reservation = row(alice)
    client = api_client_for(alice)

    response = post(client, f"{URL}{reservation.pk}/cancel")
    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "cancelled"
    assert response.json()["events"][-1]["actor"] == "alice"
    assert Reservation.objects.get(pk=reservation.pk).state == State.CANCELLED

    again = post(client, f"{URL}{reservation.pk}/cancel")
    assert again.status_code == 409 and "cancelled" in again.json()["detail"]


def test_a_started_reservation_cannot_be_cancelled(alice, api_client_for):
    reservation = row(alice, state=State.APPROVED)
    Reservation.objects.filter(pk=reservation.pk).update(start=timezone.now() - timedelta(minutes=5))
    response = post(api_client_for(alice), f"{URL}{reservation.pk}/cancel/")  # the trailing slash is accepted
    assert response.status_code == 409 and response.json()["detail"]
    assert Reservation.objects.get(pk=reservation.pk).state == State.APPROVED


def test_a_member_may_not_cancel_and_an_outsider_gets_404(alice, bob, api_client_for):
    reservation = row(bob, members=[alice])
    assert post(api_client_for(alice), f"{URL}{reservation.pk}/cancel").status_code == 403
    outsider = row(bob, start=tomorrow_at(14))
    assert post(api_client_for(alice), f"{URL}{outsider.pk}/cancel").status_code == 404
    assert set(Reservation.objects.values_list("state", flat=True)) == {State.REQUESTED}


# Deciding


def test_a_non_admin_may_not_approve_or_reject(alice, bob, api_client_for):
    own = row(alice)
    others = row(bob, start=tomorrow_at(14))
    client = api_client_for(alice)
    for decision, data in (("approve", None), ("reject", {"reason": "no"})):
        # Their own: visible, so refused with 403; another user's: not theirs to learn, 404.
        own_response = post(client, f"{URL}{own.pk}/{decision}", data)
        assert own_response.status_code == 403 and "admins" in own_response.json()["detail"]
        assert post(client, f"{URL}{others.pk}/{decision}", data).status_code == 404
    assert set(Reservation.objects.values_list("state", flat=True)) == {State.REQUESTED}
    assert not Reservation.objects.exclude(slurm_name="").exists()


@pytest.mark.parametrize("data", [None, {}, {"reason": ""}, {"reason": "   "}, {"reason": 7}])
def test_a_rejection_needs_a_reason(alice, admin_user, api_client_for, data):
    reservation = row(alice)
    response = post(api_client_for(admin_user), f"{URL}{reservation.pk}/reject", data)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["reason"]
    assert Reservation.objects.get(pk=reservation.pk).state == State.REQUESTED


def test_an_admin_rejects_anyones_request_with_a_reason(alice, admin_user, api_client_for):
    reservation = row(alice)
    client = api_client_for(admin_user)
    # An admin reads anyone's reservation before deciding.
    assert client.get(f"{URL}{reservation.pk}/").json()["purpose"] == "fine-tuning"

    response = post(client, f"{URL}{reservation.pk}/reject", {"reason": "Overlaps maintenance."})

    assert response.status_code == 200, response.json()
    assert response.json()["state"] == "rejected"
    event = Reservation.objects.get(pk=reservation.pk).events.first()
    assert (event.actor, event.to_state, event.reason) == (admin_user, State.REJECTED, "Overlaps maintenance.")
    # Nothing was made in Slurm for it.
    assert Reservation.objects.get(pk=reservation.pk).slurm_name == ""
    # A decided request cannot be decided again.
    assert post(client, f"{URL}{reservation.pk}/approve").status_code == 409
    assert post(client, f"{URL}{reservation.pk}/reject", {"reason": "again"}).status_code == 409


def test_an_approval_slurm_refuses_answers_the_failed_reservation(alice, admin_user, api_client_for, monkeypatch):
    """The row is the outcome: 200 with state failed and Slurm's refusal in words (never the
    command line), so a client reads it."""
    from cluster.errors import SlurmCommandError, words_for_slurm_output

    class RefusingCli:
        def create_gpu_reservation(self, request):
            output = "Error creating the reservation: Requested nodes are busy"
            raise SlurmCommandError(
                f"scontrol create reservation ReservationName={request.name} failed (1): {output}",
                public_message=words_for_slurm_output(output),
            )

    monkeypatch.setattr(actions, "reservation_gateway", lambda: RefusingCli())
    monkeypatch.setattr(actions, "cluster_users", lambda reservation: ["alice1"])
    reservation = row(alice)

    response = post(api_client_for(admin_user), f"{URL}{reservation.pk}/approve")

    assert response.status_code == 200
    data = response.json()
    assert data["state"] == "failed" and "The nodes asked for are busy in that window." in data["error"]
    assert "scontrol" not in data["error"]
    assert data["slurm_name"] is None


# The schema


def test_the_schema_lists_the_six_operations(client):
    schema = client.get("/api/schema/?format=json").json()
    found = {
        (method, path): operation["operationId"]
        for path, item in schema["paths"].items()
        if path.startswith(URL)
        for method, operation in item.items()
    }
    assert found == OPERATIONS
    for method, path in OPERATIONS:
        operation = schema["paths"][path][method]
        assert operation["tags"] == ["reservations"]
        assert {"bearerAuth": []} in operation["security"]
        # Every refusal is declared with the error body.
        for code, response in operation["responses"].items():
            if code.startswith("4") or code.startswith("5"):
                ref = response["content"]["application/json"]["schema"]["$ref"]
                assert ref.rsplit("/", 1)[-1] in {"Error", "ReservationRefusal"}
