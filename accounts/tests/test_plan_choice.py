"""A user's own plan (/settings/plan/, /api/v1/plan): switch to an offered plan, pause and resume
a plan with a fee; every refusal says why and writes nothing; nobody acts on another's plan."""

from datetime import date, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.conf import settings
from django.test import Client
from django.utils import timezone
from rest_framework.test import APIClient

from audit.models import AuditLog
from billing.actions import invoicing
from billing.models import Invoice, InvoiceLine
from billing.tests.invoice_support import at
from conftest import subscribe
from plans.catalog import plan_for
from plans.models import Plan, Subscription

pytestmark = pytest.mark.django_db
URL = "/settings/plan/"
API = "/api/v1/plan"


def _client(user):
    client = Client()
    client.force_login(user)
    return client


def _rows(user):
    return list(Subscription.objects.filter(user=user).order_by("started_at", "id").values_list("plan__code", "status"))


def test_the_page_shows_ones_plan_and_the_offered_plans_with_their_terms(alice):
    page = _client(alice).get(URL)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-current-plan="pro"' in html and 'data-plan-status="active"' in html
    assert "$299.00 a month" in html
    assert 'data-plan="free"' in html and 'data-plan="enterprise"' in html
    assert "100 GPU-hours of" in html and "at $0.0025 a GPU-second" in html and "500 GB of NVMe cache" in html
    assert 'data-plan-action="pause"' in html
    assert Client().get(URL).status_code == 302  # signed out: to the log-in page


def test_switching_pausing_and_resuming_on_the_page(alice, bob, settings):
    settings.PLAN_CHANGES_PER_DAY = 10  # this test makes more changes than a day allows
    client = _client(alice)
    response = client.post(URL, {"action": "pause"}, follow=True)
    assert "Paused: Pro" in response.content.decode()
    assert plan_for(alice).is_paused
    response = client.post(URL, {"action": "resume"}, follow=True)
    assert "Resumed: Pro" in response.content.decode()
    client.post(URL, {"action": "switch", "plan": "enterprise"})
    assert _rows(alice) == [
        ("free", "active"),
        ("pro", "active"),
        ("pro", "paused"),
        ("pro", "active"),
        ("enterprise", "active"),
    ]
    reasons = list(
        AuditLog.objects.filter(action="subscription.change", actor=alice)
        .order_by("id")
        .values_list("reason", flat=True)
    )
    assert reasons == ["paused by the user", "resumed by the user", "switched from pro by the user"]
    assert plan_for(bob).code == "pro" and len(_rows(bob)) == 2  # free at sign-up, then pro


@pytest.mark.parametrize(
    ("form", "message"),
    [
        ({"action": "switch", "plan": "pro"}, "You are on Pro already."),
        ({"action": "switch", "plan": "gold"}, "No plan &#x27;gold&#x27; is offered."),
        ({"action": "switch"}, "Choose one of the plans offered."),
        ({"action": "resume"}, "Your Pro plan is not paused."),
        ({"action": "delete"}, "Choose one of switch, pause, resume."),
    ],
)
def test_a_refused_change_says_why_and_writes_nothing(alice, form, message):
    before = _rows(alice)
    response = _client(alice).post(URL, form, follow=True)
    assert message in response.content.decode()
    assert _rows(alice) == before and not AuditLog.objects.filter(action="subscription.change").exists()


def test_a_plan_without_a_fee_cannot_be_paused_and_an_unoffered_plan_cannot_be_chosen(alice):
    subscribe(alice, "free")
    Plan.objects.filter(code="enterprise").update(available=False)
    client = _client(alice)
    assert "nothing to pause" in client.post(URL, {"action": "pause"}, follow=True).content.decode()
    assert 'data-plan="enterprise"' not in client.get(URL).content.decode()
    client.post(URL, {"action": "switch", "plan": "enterprise"})
    assert plan_for(alice).code == "free"


def test_a_switch_mid_month_is_billed_by_day_from_that_day(alice):
    subscribe(alice, "free")
    Subscription.objects.filter(user=alice).exclude(ended_at__isnull=True).delete()
    Subscription.objects.filter(user=alice).update(started_at=at(2026, 2, 1))
    with time_machine.travel(at(2026, 3, 17, 15)):
        _client(alice).post(URL, {"action": "switch", "plan": "pro"})
    invoice = Invoice.objects.create(user=alice, period=date(2026, 3, 1))
    invoicing.refresh_draft(invoice.pk)
    (fee,) = InvoiceLine.objects.filter(invoice=invoice, kind=InvoiceLine.Kind.PLAN_FEE)
    # Pro held part of the 17th: it pays the 17th to the 31st, 15 of 31 days of $299.
    assert fee.amount == Decimal("144.68") and "17–31 Mar 2026 (15 of 31 days)" in fee.description


def test_the_api_shows_and_changes_ones_plan(alice, bob, api_client_for):
    client = api_client_for(alice)
    body = client.get(API).json()
    assert (body["code"], body["status"], body["monthly_price"], body["can_pause"]) == (
        "pro",
        "active",
        "299.000000",
        True,
    )
    offered = {plan["code"]: plan for plan in body["offered"]}
    assert offered["enterprise"]["rates_per_second"]["a100"] == "0.002500"  # its card in force
    assert offered["pro"]["rates_per_second"] == {}  # a monthly fee, not billed per second
    assert offered["pro"]["current"] and offered["pro"]["included_gpu_hours"] == {"a100": 100}

    changed = client.post(API, {"action": "switch", "plan": "free"}, format="json")
    assert changed.status_code == 200 and changed.json()["code"] == "free"
    bad = client.post(API, {"action": "explode"}, format="json")
    assert bad.status_code == 400 and "action" in bad.json()["errors"]
    unknown = client.post(API, {"action": "switch", "plan": "gold"}, format="json")
    assert unknown.status_code == 404 and "plan" in unknown.json()["errors"]
    again = client.post(API, {"action": "switch", "plan": "free"}, format="json")
    assert again.status_code == 409 and again.json()["detail"] == "You are on Free already."
    assert client.post(API, {"action": "pause"}, format="json").status_code == 409
    assert plan_for(bob).code == "pro"

    assert APIClient().get(API).status_code in (401, 403)
    session = APIClient(enforce_csrf_checks=True)
    session.force_login(alice)
    assert session.post(API, {"action": "switch", "plan": "pro"}, format="json").status_code == 403
    assert plan_for(alice).code == "free"


def test_an_admin_changes_a_users_plan_with_a_reason_in_the_admin(admin_user, alice):
    from testing.admin_forms import change_form_data

    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = _client(admin_user)
    url = f"/django-admin/accounts/profile/{alice.profile.pk}/change/"
    page = client.get(url)
    assert "Pro (active)" in page.content.decode()
    form = {**change_form_data(page), "change_plan_to": "enterprise", "plan_status": "active", "plan_reason": ""}
    assert "A plan change needs a reason." in client.post(url, form).content.decode()
    assert plan_for(alice).code == "pro"
    form["plan_reason"] = "signed the enterprise contract"
    assert client.post(url, form).status_code == 302
    assert plan_for(alice).code == "enterprise"
    entry = AuditLog.objects.get(action="subscription.change")
    assert (entry.actor, entry.reason) == (admin_user, "signed the enterprise contract")
    # A user's own plan page is theirs: alice sees hers, and nothing of another's.
    assert 'data-current-plan="enterprise"' in _client(alice).get(URL).content.decode()


def test_plan_changes_are_limited_to_three_a_day_and_the_refusal_says_when(alice, settings):
    assert settings.PLAN_CHANGES_PER_DAY == 3
    client = _client(alice)
    for action in ("pause", "resume", "pause"):
        assert client.post(URL, {"action": action}).status_code == 302
    rows = Subscription.objects.filter(user=alice).count()
    refused = client.post(URL, {"action": "resume"}, follow=True).content.decode()
    assert "3 times in the last 24 hours" in refused and "the next change is possible from" in refused
    assert Subscription.objects.filter(user=alice).count() == rows  # nothing written
    with time_machine.travel(timezone.now() + timedelta(days=1, minutes=1)):
        assert _client(alice).post(URL, {"action": "resume"}).status_code == 302


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(
    "sqlite" in settings.DATABASES["default"]["ENGINE"],
    reason="threads on SQLite's in-memory test database meet table locks, not the row lock under test",
)
def test_five_changes_at_once_are_counted_as_five(alice):
    """Concurrent changes (the attack sent five in one second) meet the same allowance."""
    from concurrent.futures import ThreadPoolExecutor

    from django.db import connection

    from accounts.actions import plan_choice

    def attempt(action):
        try:
            plan_choice.choose(alice, action)
            return "ok"
        except plan_choice.PlanChoiceError as refusal:
            return refusal.status
        finally:
            connection.close()

    Subscription.objects.filter(user=alice).exclude(ended_at__isnull=True).delete()  # no change made today
    with ThreadPoolExecutor(5) as pool:
        outcomes = list(pool.map(attempt, ["pause", "resume", "pause", "resume", "pause"]))
    # Three changes at most, whatever order the five ran in (a repeated pause is refused too).
    changes = Subscription.objects.filter(user=alice).count() - 1
    assert changes <= 3 and outcomes.count("ok") == changes


@pytest.mark.django_db
def test_plans_are_offered_cheapest_first():
    from accounts.actions.plan_choice import offered_plans

    offered = offered_plans()
    prices = [offer.monthly_price or 0 for offer in offered]
    assert prices == sorted(prices) and len(offered) >= 3
    assert offered[0].code == "free"
