"""A free hour on the calendar leads to the request form with its type and start filled in."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.models import Node
from conftest import subscribe

pytestmark = pytest.mark.django_db


@pytest.fixture
def rtx_node(db):
    Node.objects.create(name="gpu-4090-01", state="IDLE", gpus=[{"type": "rtx4090", "count": 4, "used_indexes": []}])


def test_free_future_hours_link_to_a_prefilled_form(alice, client, rtx_node):
    subscribe(alice, "pro")
    client.force_login(alice)
    next_week = (timezone.now() + timedelta(days=7)).date()
    page = client.get(f"/reservations/calendar/?gpu_type=rtx4090&week={next_week}").content.decode()
    assert page.count("data-reserve-slot") == 7 * 24  # a whole future week, all free
    form = client.get("/reservations/new/?gpu_type=rtx4090&start=2030-01-07T03:00:00%2B00:00").content.decode()
    assert 'value="2030-01-07"' in form and 'value="03:00"' in form
    assert 'data-start-utc="2030-01-07T03:00:00+00:00"' in form


def _calendar(client, week) -> str:
    return client.get(f"/reservations/calendar/?gpu_type=rtx4090&week={week}").content.decode()


def test_no_links_in_the_past_or_for_a_plan_that_may_not_reserve(alice, client, rtx_node):
    client.force_login(alice)
    assert "data-reserve-slot" not in _calendar(client, (timezone.now() - timedelta(days=7)).date())
    subscribe(alice, "free")
    assert "data-reserve-slot" not in _calendar(client, (timezone.now() + timedelta(days=7)).date())


def test_an_unreadable_start_leaves_the_form_as_it_was(alice, client):
    client.force_login(alice)
    form = client.get("/reservations/new/?start=tomorrow&gpu_type=tpu").content.decode()
    assert 'data-start-utc=""' in form
