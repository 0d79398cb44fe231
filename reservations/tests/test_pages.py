"""The reservation pages, database only: who sees what, the request form's errors, the
availability check, notices, the admins' queue and the week calendar."""

from datetime import UTC, datetime, time, timedelta
from zoneinfo import ZoneInfo

import pytest
from django.urls import reverse
from django.utils import timezone

from cluster.models import Node
from cluster.records.types import Reservation as SlurmReservation
from conftest import subscribe
from reservations import actions
from reservations.models import Reservation, ReservationEvent, State

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def pool(monkeypatch):
    """Two A100 nodes of four GPUs, and no maintenance hold unless a test adds one (the
    real cluster's holds would make the figures depend on what else runs)."""
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    Node.objects.create(name="gpu-4090-01", state="IDLE", gpus=[{"type": "rtx4090", "count": 4, "used_indexes": []}])
    holds = []
    monkeypatch.setattr(actions, "maintenance_holds", lambda: list(holds))
    return holds


def day_after_tomorrow(hour: int = 10) -> datetime:
    return datetime.combine(timezone.now().date() + timedelta(days=2), time(hour), tzinfo=UTC)


def reservation(user, *, count=2, state=State.REQUESTED, start=None, minutes=120, nodes="", gpu_type="a100"):
    start = start or day_after_tomorrow()
    return Reservation.objects.create(
        user=user, gpu_type=gpu_type, gpu_count=count, start=start, end=start + timedelta(minutes=minutes),
        purpose="fine-tuning", state=state, nodes=nodes,
    )  # fmt: skip


def form(**overrides):
    start = day_after_tomorrow()
    values = {
        "gpu_type": "a100",
        "gpu_count": "2",
        "start_date": start.date().isoformat(),
        "start_time": "10:00",
        "tz": "UTC",
        "duration_minutes": "120",
        "purpose": "fine-tuning a 7B model",
        "members": "",
    }
    return {**values, **overrides}


# Access


def test_anonymous_visitors_are_sent_to_log_in(client):
    for name in ("reservations:list", "reservations:new", "reservations:calendar", "reservations:queue"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_navigation_offers_reservations_to_users_and_admins_only(client, alice, admin_user, marketer):
    link = f'href="{reverse("reservations:list")}"'
    for person, shown in ((alice, True), (admin_user, True), (marketer, False)):
        client.force_login(person)
        assert (link in client.get("/").content.decode()) is shown


def test_another_users_reservation_is_404_and_a_member_may_view_it(client, alice, bob, admin_user):
    mine = reservation(alice)
    url = reverse("reservations:detail", args=[mine.pk])
    client.force_login(bob)
    assert client.get(url).status_code == 404
    mine.members.add(bob)
    response = client.get(url)
    assert response.status_code == 200 and "data-cancel" not in response.content.decode()
    client.force_login(admin_user)
    assert client.get(url).status_code == 200
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 200 and "data-cancel" in response.content.decode()


@pytest.mark.parametrize("person", ["alice", "marketer"])
def test_the_queue_is_for_admins_only(client, request, person):
    client.force_login(request.getfixturevalue(person))
    assert client.get(reverse("reservations:queue")).status_code == 403


def test_only_admins_approve_or_reject(client, alice, admin_user, monkeypatch):
    waiting = reservation(alice)
    called = []
    monkeypatch.setattr(actions, "approve", lambda pk, admin, reason="": called.append((pk, admin)) or waiting)
    client.force_login(alice)
    assert client.post(reverse("reservations:approve", args=[waiting.pk])).status_code == 403
    assert client.post(reverse("reservations:reject", args=[waiting.pk]), {"reason": "no"}).status_code == 403
    assert called == [] and Reservation.objects.get(pk=waiting.pk).state == State.REQUESTED
    client.force_login(admin_user)
    response = client.post(reverse("reservations:approve", args=[waiting.pk]))
    assert response.status_code == 302 and called == [(waiting.pk, admin_user)]


# The request form


def test_a_request_is_recorded_in_utc_from_the_users_zone(client, alice):
    client.force_login(alice)
    response = client.post(reverse("reservations:new"), form(tz="Europe/Berlin", members=""))
    created = Reservation.objects.get(user=alice)
    assert response.status_code == 302 and response["Location"] == reverse("reservations:detail", args=[created.pk])
    berlin_ten = datetime.combine(day_after_tomorrow().date(), time(10), tzinfo=ZoneInfo("Europe/Berlin"))
    assert created.start == berlin_ten and created.start.utcoffset() == timedelta(0)
    assert created.end - created.start == timedelta(minutes=120)
    assert (created.state, created.gpu_count, created.gpu_type) == (State.REQUESTED, 2, "a100")


def test_bad_input_shows_every_field_error_and_creates_nothing(client, alice):
    client.force_login(alice)
    response = client.post(
        reverse("reservations:new"),
        form(gpu_count="two", start_date="", duration_minutes="7", purpose=" ", members="nobody-here"),
    )
    assert response.status_code == 400
    errors = response.context["errors"]
    assert set(errors) == {"gpu_count", "start", "duration_minutes", "purpose", "members"}
    page = response.content.decode()
    assert page.count('class="field-error"') >= 5 and "nobody-here" in page
    assert 'value="two"' in page  # what was typed is kept
    assert not Reservation.objects.exists()


def test_a_start_in_the_past_or_off_the_grid_is_refused(client, alice):
    client.force_login(alice)
    yesterday = (timezone.now() - timedelta(days=1)).date().isoformat()
    response = client.post(reverse("reservations:new"), form(start_date=yesterday))
    assert response.status_code == 400 and "future" in " ".join(response.context["errors"]["start"])
    response = client.post(reverse("reservations:new"), form(start_time="10:07"))
    assert response.status_code == 400 and "grid" in " ".join(response.context["errors"]["start"])
    assert not Reservation.objects.exists()


def test_the_free_plan_may_not_reserve(client, alice):
    subscribe(alice, "free")
    client.force_login(alice)
    page = client.get(reverse("reservations:new")).content.decode()
    assert "does not include reservations" in page
    response = client.post(reverse("reservations:new"), form(gpu_type="rtx4090", gpu_count="1"))
    assert response.status_code == 400 and "gpu_type" in response.context["errors"]
    assert not Reservation.objects.exists()


def test_a_taken_slot_is_refused_with_the_nearest_free_starts(client, alice, bob):
    taken = reservation(bob, count=8, state=State.APPROVED, nodes="gpu-a100-0[1-2]")
    subscribe(alice, "enterprise")
    client.force_login(alice)
    response = client.post(reverse("reservations:new"), form(gpu_count="2"))
    assert response.status_code == 400 and response.context["suggestions"][0] == taken.end
    assert f'data-suggestion="{taken.end.isoformat()}"' in response.content.decode()
    assert Reservation.objects.filter(user=alice).count() == 0


# The availability check


def availability(client, **params):
    query = {"gpu_type": "a100", "count": "2", "start": day_after_tomorrow().isoformat(), "duration": "120", **params}
    return client.get(reverse("reservations:availability"), query)


def test_availability_says_free_with_the_free_gpus_per_node(client, alice, bob):
    reservation(bob, count=3, state=State.APPROVED, nodes="gpu-a100-01")
    reservation(bob, count=4, state=State.REQUESTED)  # not approved: promises nothing
    client.force_login(alice)
    answer = availability(client).json()
    assert answer["available"] is True and answer["suggestions"] == []
    # Bob's 3 GPUs take gpu-a100-01's cores: its fourth GPU is free to nobody.
    assert (answer["capacity"], answer["free_gpus"]) == (8, 4)
    assert answer["per_node_free"] == {"gpu-a100-01": 0, "gpu-a100-02": 4}


def test_availability_offers_the_nearest_free_starts_when_taken(client, alice, bob, pool):
    taken = reservation(bob, count=1, state=State.APPROVED, nodes="gpu-a100-01")
    client.force_login(alice)
    answer = availability(client, count="5").json()
    assert answer["available"] is False and answer["free_gpus"] == 4  # one GPU held takes its node
    assert answer["suggestions"][0] == taken.end.isoformat()
    # A maintenance hold on the other node takes its GPUs too.
    pool.append(
        SlurmReservation(
            name="maint_gpu_reset",
            users=("root",),
            nodes="gpu-a100-02",
            start_time=taken.start - timedelta(hours=1),
            end_time=taken.end,
            tres="",
            flags=("MAINT",),
        )  # fmt: skip
    )
    assert availability(client, count="1").json()["free_gpus"] == 0


def test_availability_refuses_bad_input_with_field_errors(client, alice):
    client.force_login(alice)
    response = availability(client, gpu_type="v100", count="0", start="tomorrow", duration="x")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"gpu_type", "gpu_count", "start", "duration_minutes"}
    past = (timezone.now() - timedelta(hours=1)).isoformat()
    assert set(availability(client, start=past).json()["errors"]) == {"start"}


# My reservations, notices, cancel


def test_decisions_show_once_as_notices(client, alice, admin_user):
    mine = reservation(alice)
    actions.reject(mine.pk, admin_user, "The cluster is booked for a demo that day.")
    client.force_login(alice)
    page = client.get(reverse("reservations:list")).content.decode()
    assert "The cluster is booked for a demo that day." in page and "data-notices" in page
    assert not ReservationEvent.objects.filter(reservation=mine, seen_at__isnull=True).exists()
    assert "data-notices" not in client.get(reverse("reservations:list")).content.decode()
    # The history stays on the reservation's page.
    assert "booked for a demo" in client.get(reverse("reservations:detail", args=[mine.pk])).content.decode()


def test_the_owner_cancels_and_nobody_else_can(client, alice, bob):
    mine = reservation(alice)
    client.force_login(bob)
    assert client.post(reverse("reservations:cancel", args=[mine.pk])).status_code == 404
    assert Reservation.objects.get(pk=mine.pk).state == State.REQUESTED
    client.force_login(alice)
    assert client.get(reverse("reservations:cancel", args=[mine.pk])).status_code == 405
    response = client.post(reverse("reservations:cancel", args=[mine.pk]), {"next": "list"})
    assert response.status_code == 302 and response["Location"] == reverse("reservations:list")
    assert Reservation.objects.get(pk=mine.pk).state == State.CANCELLED
    assert "data-cancel" not in client.get(reverse("reservations:list")).content.decode()


# The admins' queue


def test_the_queue_shows_each_slots_capacity_and_slurms_message(client, alice, bob, admin_user):
    reservation(bob, count=3, state=State.APPROVED, nodes="gpu-a100-01")
    waiting = reservation(alice, count=2)
    failed = reservation(alice, count=1, state=State.FAILED, start=day_after_tomorrow(14))
    Reservation.objects.filter(pk=failed.pk).update(error="Slurm refused the reservation: Requested nodes are busy")
    client.force_login(admin_user)
    response = client.get(reverse("reservations:queue"))
    rows = {row["reservation"].pk: row for row in response.context["rows"]}
    assert set(rows) == {waiting.pk, failed.pk}
    assert (rows[waiting.pk]["free"], rows[waiting.pk]["capacity"]) == (4, 8)
    assert rows[waiting.pk]["per_node"] == [("gpu-a100-01", 0), ("gpu-a100-02", 4)]
    assert rows[failed.pk]["free"] == 8  # bob's ends before it starts
    page = response.content.decode()
    assert "Requested nodes are busy" in page and "Retry" in page and "fine-tuning" in page
    # Once its window has begun, a failed reservation is offered no Retry, only the words why.
    Reservation.objects.filter(pk=failed.pk).update(start=timezone.now() - timedelta(minutes=5))
    page = client.get(reverse("reservations:queue")).content.decode()
    section = page[page.index(f'data-reservation="{failed.pk}"') :]
    section = section[: section.index("</section>")]
    assert "Retry" not in section and "data-begun" in section and "data-reject" in section


def test_reject_needs_a_reason(client, alice, admin_user):
    waiting = reservation(alice)
    client.force_login(admin_user)
    client.post(reverse("reservations:reject", args=[waiting.pk]), {"reason": "  "})
    assert Reservation.objects.get(pk=waiting.pk).state == State.REQUESTED
    client.post(reverse("reservations:reject", args=[waiting.pk]), {"reason": "Maintenance that week."})
    assert Reservation.objects.get(pk=waiting.pk).state == State.REJECTED
    event = ReservationEvent.objects.get(reservation=waiting, to_state=State.REJECTED)
    assert (event.actor, event.reason) == (admin_user, "Maintenance that week.")


# The week calendar


def test_the_calendar_shows_own_blocks_and_others_anonymously(client, alice, bob, admin_user, pool):
    mine = reservation(alice, count=1)
    theirs = reservation(bob, count=3, state=State.APPROVED, nodes="gpu-a100-01", start=day_after_tomorrow(11))
    reservation(bob, count=1, state=State.REQUESTED, start=day_after_tomorrow(16))  # not holding: not shown
    start = day_after_tomorrow()
    pool.append(
        SlurmReservation(
            name="maint_gpu_reset",
            users=("root",),
            nodes="gpu-a100-02",
            start_time=start + timedelta(hours=5),
            end_time=start + timedelta(hours=6),
            tres="",
            flags=("MAINT",),
        )  # fmt: skip
    )
    url = reverse("reservations:calendar") + f"?gpu_type=a100&week={start.date().isoformat()}"
    client.force_login(alice)
    response = client.get(url)
    page = response.content.decode()
    assert response.context["capacity"] == 8
    assert f"#{mine.pk} 1 GPU · requested" in page
    assert "3 GPU reserved" in page and "bob" not in page and f"#{theirs.pk}" not in page
    assert "maintenance gpu-a100-02" in page
    assert "1 GPU reserved" not in page
    # 11:00 that day: bob's 3 are held, and with them all of gpu-a100-01 (a GPU reservation
    # takes its node's cores); 15:00: the maintenance hold takes the other node.
    day = next(day for day in response.context["days"] if day["date"] == start.date())
    assert day["hours"][11]["free"] == 4 and day["hours"][15]["free"] == 4 and day["hours"][9]["free"] == 8
    monday = response.context["week"]
    assert monday.weekday() == 0 and monday <= start.date() < monday + timedelta(days=7)
    assert f"week={(monday + timedelta(days=7)).isoformat()}" in page
    client.force_login(admin_user)
    assert f"bob #{theirs.pk} 3 GPU" in client.get(url).content.decode()


def test_the_calendar_of_another_week_or_type_leaves_the_reservation_out(client, alice):
    mine = reservation(alice)
    client.force_login(alice)
    later = (mine.start + timedelta(days=7)).date().isoformat()
    assert f"#{mine.pk} " not in client.get(reverse("reservations:calendar"), {"week": later}).content.decode()
    other_type = client.get(reverse("reservations:calendar"), {"gpu_type": "rtx4090", "week": mine.start.date()})
    assert f"#{mine.pk} " not in other_type.content.decode() and other_type.context["capacity"] == 4
    assert client.get(reverse("reservations:calendar"), {"gpu_type": "v100"}).status_code == 404


def _own_request(user):
    start = timezone.now() + timedelta(days=1)
    return Reservation.objects.create(
        user=user, gpu_type="a100", gpu_count=1, start=start, end=start + timedelta(hours=1), purpose="mine"
    )


def test_an_admin_cannot_approve_their_own_request_while_another_admin_can(client, admin_user):
    from conftest import _person

    _person("grace", "admin", "pro")  # a second admin
    mine = _own_request(admin_user)
    client.force_login(admin_user)
    response = client.post(reverse("reservations:approve", args=[mine.pk]), {"reason": "I need it"}, follow=True)
    assert "another admin approves it" in response.content.decode()
    assert Reservation.objects.get(pk=mine.pk).state == State.REQUESTED  # nothing written


def test_a_lone_admin_approves_their_own_request_only_with_a_reason(admin_user):
    mine = _own_request(admin_user)
    with pytest.raises(actions.StateError, match="needs a reason"):
        actions.approve(mine.pk, admin_user)
    assert Reservation.objects.get(pk=mine.pk).state == State.REQUESTED
    actions._check_not_self_approval(mine, admin_user, "the only admin, testing the H100s")  # passes


def test_a_cancelled_reservation_no_longer_names_its_slurm_reservation(client, alice):
    held = reservation(alice, state=State.APPROVED, nodes="gpu-a100-01")
    Reservation.objects.filter(pk=held.pk).update(slurm_name="gpupool_r1")
    client.force_login(alice)
    assert "gpupool_r1" in client.get(reverse("reservations:detail", args=[held.pk])).content.decode()
    Reservation.objects.filter(pk=held.pk).update(state=State.CANCELLED)
    assert "gpupool_r1" not in client.get(reverse("reservations:detail", args=[held.pk])).content.decode()
