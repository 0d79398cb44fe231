"""Budgets: set and cleared on their page, an e-mail at 80 % and at 100 % of the month's
charges (each once a month, one sender among racing workers), and the hold that refuses new
submissions, on the form and over the API, until it is lifted."""

import threading
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection

from billing.actions import budgets
from billing.models import Budget
from billing.tests.usage_records import record
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC

NOW = datetime(2026, 5, 15, 12, 0, tzinfo=UTC)
URL = "/billing/budget/"


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def _spend(user, amount, when=None):
    record(user, when or NOW - timedelta(hours=1), seconds=60, amount_gpu=Decimal(amount))


@pytest.mark.django_db
def test_the_page_sets_changes_and_clears_the_budget(alice, bob, client):
    client.force_login(alice)
    assert client.get(URL).status_code == 200
    response = client.post(URL, {"action": "save", "monthly_amount": "250.50", "hold_at_limit": "on"})
    assert response.status_code == 302
    budget = Budget.objects.get(user=alice)
    assert (budget.monthly_amount, budget.hold_at_limit) == (Decimal("250.50"), True)
    client.post(URL, {"action": "save", "monthly_amount": "300"})
    budget.refresh_from_db()
    assert (budget.monthly_amount, budget.hold_at_limit) == (Decimal("300.00"), False)
    assert not Budget.objects.filter(user=bob).exists()
    client.post(URL, {"action": "clear"})
    assert not Budget.objects.filter(user=alice).exists()


@pytest.mark.django_db
@pytest.mark.parametrize("amount", ["0", "-5", "abc", "12.345", ""])
def test_a_bad_amount_is_refused_and_changes_nothing(alice, client, amount):
    Budget.objects.create(user=alice, monthly_amount=Decimal("100"))
    client.force_login(alice)
    response = client.post(URL, {"action": "save", "monthly_amount": amount, "hold_at_limit": "on"})
    assert response.status_code == 400
    assert 'class="field-error"' in response.content.decode()
    budget = Budget.objects.get(user=alice)
    assert (budget.monthly_amount, budget.hold_at_limit) == (Decimal("100.00"), False)


@pytest.mark.django_db
def test_the_page_shows_the_months_charges_against_the_budget(alice, bob, client):
    Budget.objects.create(user=alice, monthly_amount=Decimal("200"))
    _spend(alice, "50")
    _spend(bob, "1000")
    client.force_login(alice)
    page = client.get(URL).content.decode()
    assert "$50.00 (25&nbsp;%)" in page


@pytest.fixture
def on_commit(django_capture_on_commit_callbacks):
    """Run what waits for the commit (the e-mails) as the test's transaction would commit."""

    def _run(call, *args, **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            return call(*args, **kwargs)

    return _run


@pytest.mark.django_db
def test_one_e_mail_at_80_and_one_at_100_percent_each_month(alice, mailoutbox, on_commit):
    Budget.objects.create(user=alice, monthly_amount=Decimal("100"))
    _spend(alice, "79.99")
    assert on_commit(budgets.check_budget, alice.pk) is None and mailoutbox == []
    _spend(alice, "0.01")  # exactly 80 %
    assert on_commit(budgets.check_budget, alice.pk) == 80
    assert on_commit(budgets.check_budget, alice.pk) is None
    on_commit(budgets.check_budgets)
    assert len(mailoutbox) == 1
    assert "80 %" in mailoutbox[0].subject and mailoutbox[0].to == [alice.email]
    assert "$80.00" in mailoutbox[0].body
    _spend(alice, "20")  # 100 %
    assert on_commit(budgets.check_budgets) == 1
    assert on_commit(budgets.check_budgets) == 0 and on_commit(budgets.check_budget, alice.pk) is None
    assert [message.subject for message in mailoutbox] == [
        "[GPU pool] 80 % of your monthly budget used",
        "[GPU pool] 100 % of your monthly budget used",
    ]
    # A new month starts the warnings again; last month's charges are not this month's.
    with time_machine.travel(datetime(2026, 6, 2, tzinfo=UTC), tick=False):
        assert on_commit(budgets.check_budget, alice.pk) is None
        _spend(alice, "150", when=datetime(2026, 6, 1, 10, tzinfo=UTC))
        assert on_commit(budgets.check_budget, alice.pk) == 100
    # Straight past 100 %: only the 100 % e-mail.
    assert [message.subject.split()[2] for message in mailoutbox] == ["80", "100", "100"]


@pytest.mark.django_db
def test_a_new_amount_starts_the_months_warnings_afresh(alice, client, mailoutbox, on_commit):
    Budget.objects.create(user=alice, monthly_amount=Decimal("100"))
    _spend(alice, "85")
    assert on_commit(budgets.check_budget, alice.pk) == 80
    client.force_login(alice)
    on_commit(client.post, URL, {"action": "save", "monthly_amount": "100"})  # the same amount: no new e-mail
    assert len(mailoutbox) == 1
    on_commit(client.post, URL, {"action": "save", "monthly_amount": "105"})  # 85 of 105 is still past 80 %
    assert len(mailoutbox) == 2


@pytest.mark.django_db(transaction=True)
def test_two_workers_checking_at_once_send_one_e_mail(alice, mailoutbox, monkeypatch):
    Budget.objects.create(user=alice, monthly_amount=Decimal("100"))
    _spend(alice, "90")
    # Both workers read the budget and the charges before either claims the warning.
    barrier = threading.Barrier(2, timeout=10)
    reading = budgets.month_to_date_charges

    def read_then_wait(user_id, period):
        spent = reading(user_id, period)
        barrier.wait()
        return spent

    monkeypatch.setattr(budgets, "month_to_date_charges", read_then_wait)
    results = []

    def worker():
        try:  # the frozen clock is the process's: the threads see NOW too
            results.append(budgets.check_budget(alice.pk))
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(results, key=str) == [80, None]
    assert len(mailoutbox) == 1


def _ready(user):
    user.profile.cluster_username = user.username
    user.profile.provisioned_at = NOW - timedelta(days=30)
    user.profile.save()


def _form(client):
    fields = {**GOOD_SPEC, "gpu_count": "1", "time_limit_minutes": "5"}
    return client.post("/jobs/new/", fields)


@pytest.mark.django_db
def test_a_held_budget_refuses_submissions_until_it_is_lifted(alice, client, api_client_for):
    _ready(alice)
    api = api_client_for(alice)
    client.force_login(alice)
    budget = Budget.objects.create(user=alice, monthly_amount=Decimal("50"), hold_at_limit=True)
    _spend(alice, "49.99")
    assert api.post("/api/v1/jobs/", GOOD_SPEC, format="json").status_code == 201  # not spent yet
    _spend(alice, "0.01")

    refused = api.post("/api/v1/jobs/", GOOD_SPEC, format="json")
    assert refused.status_code == 403
    assert "budget of $50.00 is spent" in refused.json()["detail"]
    form = _form(client)
    assert form.status_code == 400 and "budget of $50.00 is spent" in form.content.decode()
    assert Job.objects.filter(owner=alice).count() == 1
    Job.objects.filter(owner=alice).update(state="COMPLETED")  # Pro holds 2 A100s at once

    # Only the hold refuses: without it the budget only e-mails.
    budget.hold_at_limit = False
    budget.save()
    assert api.post("/api/v1/jobs/", GOOD_SPEC, format="json").status_code == 201
    budget.hold_at_limit = True
    budget.save()
    assert api.post("/api/v1/jobs/", GOOD_SPEC, format="json").status_code == 403
    # Raising the budget lifts the hold at once.
    client.post(URL, {"action": "save", "monthly_amount": "80", "hold_at_limit": "on"})
    assert _form(client).status_code == 302
    assert Job.objects.filter(owner=alice).count() == 3
