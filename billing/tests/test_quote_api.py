"""POST /api/v1/billing/quote: the article's example to the last digit as decimal strings, the
plan's prices, bad input named by field, and the API's usual refusals."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from rest_framework.test import APIClient

from conftest import subscribe
from plans.models import RateCard

pytestmark = pytest.mark.django_db
URL = "/api/v1/billing/quote"
ARTICLE = {"gpu_type": "a100", "gpu_count": 1, "seconds": 1800, "gpu_memory_gb": 24, "nvme_gb": 500}


def test_the_articles_example_over_the_api(api_client_for, alice):
    response = api_client_for(alice).post(URL, ARTICLE, format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["plan"] == "pro"  # alice's
    assert [(line["kind"], line["quantity"], line["unit"]) for line in body["lines"]] == [
        ("gpu", "1800", "GPU-s"),
        ("gpu_memory", "43200", "GB-s"),
        ("nvme", "250", "GB-h"),
    ]
    assert [line["amount"] for line in body["lines"]] == ["2.70", "0.864", "5.00"]
    assert [line["amount_rounded"] for line in body["lines"]] == ["2.70", "0.86", "5.00"]
    assert body["total"] == "8.564"
    assert body["total_rounded"] == "8.56"
    assert body["rates"]["card"] == "list"
    assert body["rates"]["gpu_price_per_second"] == "0.0015"
    assert body["rates"]["gpu_memory_price_per_gb_second"] == "0.00002"
    assert body["rates"]["nvme_price_per_gb_hour"] == "0.02"
    assert body["rates"]["gpu_price_from"] == "rate card list"
    # Decimal strings, never JSON numbers: a float would not say $8.564 exactly.
    raw = json.loads(response.content, parse_float=Decimal)
    assert isinstance(raw["total"], str) and all(isinstance(line["amount"], str) for line in raw["lines"])


def test_enterprise_pays_the_enterprise_card_for_every_gpu_type(api_client_for, alice):
    subscribe(alice, "enterprise")
    client = api_client_for(alice)
    a100 = client.post(URL, {"gpu_type": "a100", "gpu_count": 2, "seconds": 1000}, format="json").json()
    assert a100["plan"] == "enterprise"
    assert a100["rates"]["gpu_price_per_second"] == "0.0025"
    assert a100["rates"]["gpu_price_from"] == "rate card enterprise"
    assert a100["total"] == "5.00"
    rtx = client.post(URL, {"gpu_type": "rtx4090", "gpu_count": 1, "seconds": 1000}, format="json").json()
    # The enterprise card's RTX 4090 price is the list card's (plans/seed.py): the same amount as before.
    assert rtx["rates"]["gpu_price_from"] == "rate card enterprise"
    assert rtx["total"] == "0.48"


def test_a_plan_named_in_the_body_is_quoted_instead_of_the_callers(api_client_for, alice):
    body = api_client_for(alice).post(URL, {**ARTICLE, "plan": "enterprise"}, format="json").json()
    assert body["plan"] == "enterprise"
    # 1800 x 0.0025 = 4.50, memory and NVMe at the enterprise card (the list prices): 4.50 + 0.864 + 5.00.
    assert body["total"] == "10.364"


def test_a_new_list_card_changes_the_quote_from_its_date(api_client_for, alice, make_card):
    from django.utils import timezone

    make_card("list", timezone.now(), {"a100": Decimal("0.002")}, name="Later list")
    body = api_client_for(alice).post(URL, ARTICLE, format="json").json()
    assert body["rates"]["name"] == "Later list"
    assert body["lines"][0]["amount"] == "3.60"


def test_an_unknown_plan_is_named(api_client_for, alice):
    response = api_client_for(alice).post(URL, {**ARTICLE, "plan": "gold"}, format="json")
    assert response.status_code == 404
    assert "plan" in response.json()["errors"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"gpu_type": "b200"}, "gpu_type"),
        ({"gpu_count": -1}, "gpu_count"),
        ({"gpu_count": "1"}, "gpu_count"),
        ({"gpu_count": 1.5}, "gpu_count"),
        ({"seconds": True}, "seconds"),
        ({"seconds": 10**12}, "seconds"),
        ({"gpu_memory_gb": -24}, "gpu_memory_gb"),
        ({"nvme_gb": "500"}, "nvme_gb"),
        ({"plan": 3}, "plan"),
        ({"plan": "Not A Plan!"}, "plan"),
    ],
)
def test_bad_input_is_a_400_naming_the_field(api_client_for, alice, change, field):
    response = api_client_for(alice).post(URL, {**ARTICLE, **change}, format="json")
    assert response.status_code == 400
    body = response.json()
    assert list(body["errors"]) == [field]
    assert body["detail"]


def test_missing_fields_are_named(api_client_for, alice):
    response = api_client_for(alice).post(URL, {"gpu_type": "a100"}, format="json")
    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"gpu_count", "seconds"}


def test_a_gpu_type_the_card_does_not_price_is_a_conflict(api_client_for, alice):
    card = RateCard.objects.get(code="list")
    # The seeded card is in force and refuses edits: remove the row in SQL, as a bad import would.
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM billing_ratecardgpuprice WHERE card_id = %s AND gpu_type = 'h100'", [card.pk])
    response = api_client_for(alice).post(URL, {**ARTICLE, "gpu_type": "h100"}, format="json")
    assert response.status_code == 409
    assert "gpu_type" in response.json()["errors"]


def test_without_a_card_in_force_the_quote_says_prices_are_not_set(api_client_for, alice):
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM billing_ratecardgpuprice")
        cursor.execute("DELETE FROM plans_ratecarddiscount")
        cursor.execute("DELETE FROM plans_ratecardspotmultiplier")
        cursor.execute("DELETE FROM billing_ratecard")
    response = api_client_for(alice).post(URL, ARTICLE, format="json")
    assert response.status_code == 409
    assert "not set" in response.json()["detail"]


def test_refusals_have_the_apis_shape(alice):
    anonymous = APIClient()
    assert anonymous.post(URL, ARTICLE, format="json").status_code == 401
    client = APIClient()
    client.force_authenticate(alice)
    response = client.post(URL, "gpu_type=a100", content_type="application/x-www-form-urlencoded")
    assert response.status_code == 415
    assert response.json()["detail"]


def test_the_session_cookie_needs_the_csrf_token(alice):
    client = APIClient(enforce_csrf_checks=True)
    client.force_login(alice)
    assert client.post(URL, ARTICLE, format="json").status_code == 403


def test_the_quote_says_what_the_callers_plan_hours_and_credits_would_cover(api_client_for, alice):
    from django.utils import timezone

    from billing.tests.invoice_support import charge
    from credits.actions import ledger

    # Pro: 100 A100-hours a month; 1 hour of them already used this month.
    charge(alice, timezone.now(), plan="pro", billable=0, included=3600)
    client = api_client_for(alice)
    body = client.post(URL, {**ARTICLE, "seconds": 7200}, format="json").json()
    assert body["coverage"] == {
        "gpu_seconds": 7200,
        "plan_gpu_seconds_left": 99 * 3600,
        "credit_gpu_seconds": 0,
        "covered_gpu_seconds": 7200,
        "included_gpu_seconds": 7200,
        "credited_gpu_seconds": 0,
        "payable": "0.00",  # all of it in the plan's hours: GPU memory and Pro's 500 GB NVMe too
        "payable_exact": "0.00",
    }
    # RTX 4090 hours are not in Pro: credits only (1 credit = 1 RTX 4090 GPU-second).
    ledger.grant(alice.pk, 1000, key="quote-test", grant_kind="signup", campaign_id=None)
    rtx = client.post(URL, {**ARTICLE, "gpu_type": "rtx4090", "gpu_memory_gb": 0}, format="json").json()
    assert rtx["coverage"]["plan_gpu_seconds_left"] == 0
    assert rtx["coverage"]["credit_gpu_seconds"] == 1000 and rtx["coverage"]["covered_gpu_seconds"] == 1000
    # Credit past its expiry covers nothing, even before the beat task writes it off.
    import time_machine

    with time_machine.travel(timezone.now() + timedelta(days=settings.CREDIT_EXPIRY_DAYS, minutes=1)):
        expired = client.post(URL, {**ARTICLE, "gpu_type": "rtx4090", "gpu_memory_gb": 0}, format="json").json()
    assert expired["coverage"]["credit_gpu_seconds"] == 0 and expired["coverage"]["covered_gpu_seconds"] == 0
    assert ledger.balance(alice.pk) == 1000  # not written off: the quote only read
    # Another plan's quote says nothing about the caller's coverage.
    other = client.post(URL, {**ARTICLE, "plan": "enterprise"}, format="json").json()
    assert other["coverage"] is None


def test_payable_is_what_charging_would_bill_of_the_quote(api_client_for, alice, bob):
    """The form's "you would pay" and the run's charge split the same way: the uncovered
    GPU-seconds at the GPU price, GPU memory and the NVMe beyond the plan's included NVMe by the
    uncovered share. (The quote used to charge GPU memory that included hours then covered.)"""
    from billing.pricing import to_cents
    from billing.tests.test_charging import charged, usage

    subscribe(bob, "enterprise")
    client = api_client_for(bob)
    body = client.post(URL, {**ARTICLE, "seconds": 1800}, format="json").json()  # Enterprise: nothing included
    assert body["coverage"]["covered_gpu_seconds"] == 0
    run = charged(usage(bob, seconds=1800, memory_gbs=24 * 1800, nvme_gb=500))
    assert Decimal(body["coverage"]["payable"]) == to_cents(run.amount)
    # Pro on RTX 4090 (no included 4090 hours) with 600 GB of NVMe: 100 GB beyond the 500 included.
    rtx = api_client_for(alice).post(
        URL, {"gpu_type": "rtx4090", "gpu_count": 1, "seconds": 3600, "gpu_memory_gb": 0, "nvme_gb": 600},
        format="json",
    ).json()  # fmt: skip
    gpu_price = Decimal(rtx["rates"]["gpu_price_per_second"])
    nvme_price = Decimal(rtx["rates"]["nvme_price_per_gb_hour"])
    assert Decimal(rtx["coverage"]["payable"]) == to_cents(3600 * gpu_price + 100 * nvme_price)
