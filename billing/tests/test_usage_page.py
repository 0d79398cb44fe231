"""The usage page: the month by day and GPU type, included hours left, charges so far and the
projection; the signed-in user's own records only, in a fixed number of queries."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from billing.invoices.drafts import open_draft
from billing.models import UsageRecord
from billing.tests.usage_records import record
from conftest import subscribe

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 5, 15, 12, 0, tzinfo=UTC)  # day 15 of a 31-day month
URL = "/billing/usage/"


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def _page(client, user):
    client.force_login(user)
    response = client.get(URL)
    assert response.status_code == 200
    return response


def test_signing_in_is_needed(client):
    response = client.get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_month_by_day_and_gpu_type_with_hours_left_and_the_projection(alice, client):
    # Pro: 100 A100-hours included. 10 of them used on the 2nd, then 1 billable hour on the 3rd.
    record(alice, datetime(2026, 5, 2, 10, tzinfo=UTC), seconds=36_000, included=36_000)
    record(alice, datetime(2026, 5, 3, 10, tzinfo=UTC), seconds=3600)  # 3600 x 0.0015 = 5.40
    record(alice, datetime(2026, 5, 3, 11, tzinfo=UTC), seconds=1800, gpu_type="rtx4090", amount_gpu=Decimal("0.6"))
    # Last month's run does not show on the chart; an uncharged one shows its hours, no money.
    record(alice, datetime(2026, 4, 30, 10, tzinfo=UTC), seconds=3600, amount_gpu=Decimal("100"))
    record(alice, datetime(2026, 5, 14, 10, tzinfo=UTC), seconds=7200, charged=False)
    month = _page(client, alice).context["month"]
    assert [(row.day.day, row.gpu_type, row.gpu_hours, row.charges) for row in month.days] == [
        (2, "a100", Decimal("10.00"), Decimal("0.00")),
        (3, "a100", Decimal("1.00"), Decimal("5.40")),
        (3, "rtx4090", Decimal("0.50"), Decimal("0.60")),
        (14, "a100", Decimal("2.00"), Decimal("0.00")),
    ]
    assert month.charges == Decimal("6.00")
    assert [(row.gpu_type, row.hours, row.left_hours) for row in month.included] == [("a100", 100, Decimal("90.00"))]
    # 6.00 / 15 days x 31 days = 12.40 of usage, plus Pro's fee as the invoice bills it: alice
    # took Pro today, the 15th, so 17 of 31 days (163.97), not the whole 299.00.
    assert month.projected_usage == Decimal("12.40") and month.plan_fee == Decimal("163.97")
    assert month.projected_total == Decimal("176.37")
    chart = _page(client, alice).context["chart"]
    assert len(chart["days"]) == 15 and chart["days"][0] == "2026-05-01"
    a100 = next(trace for trace in chart["traces"] if trace["name"] == "a100")
    assert a100["gpu_hours"][1] == "10.00" and a100["charges"][2] == "5.40" and a100["charges"][0] == "0"


def test_only_the_users_own_records_are_on_it(alice, bob, client):
    record(alice, datetime(2026, 5, 3, 10, tzinfo=UTC), seconds=3600, amount_gpu=Decimal("7"))
    record(bob, datetime(2026, 5, 4, 10, tzinfo=UTC), seconds=7200, gpu_type="h100", amount_gpu=Decimal("900"))
    record(bob, datetime(2026, 5, 3, 10, tzinfo=UTC), seconds=3600, included=3600)
    response = _page(client, alice)
    month = response.context["month"]
    assert month.charges == Decimal("7.00")
    assert [(row.day.day, row.gpu_type) for row in month.days] == [(3, "a100")]
    assert month.included[0].left_hours == Decimal("100.00")  # bob's included hour is his
    assert "h100" not in response.content.decode() and "900" not in response.content.decode()


def test_the_free_plan_shows_its_capped_hours(alice, client):
    subscribe(alice, "free")
    record(alice, datetime(2026, 5, 3, 10, tzinfo=UTC), seconds=9000, gpu_type="rtx4090", included=9000, plan="free")
    month = _page(client, alice).context["month"]
    assert [(row.gpu_type, row.left_hours) for row in month.included] == [("rtx4090", Decimal("7.50"))]
    # Pro this morning, Free since: the day of a switch pays both plans (1/31 of Pro's fee), as
    # the invoice bills it; Free itself bills nothing.
    assert month.projected_usage == Decimal("0.00") and month.projected_total == Decimal("9.65")


def _bulk_records(user, count):
    """`count` charged records over the month so far, of three GPU types."""
    with transaction.atomic():
        draft = open_draft(user.pk, NOW)
    start = datetime(2026, 5, 1, tzinfo=UTC)
    types = ["a100", "rtx4090", "h100"]
    UsageRecord.objects.bulk_create(
        UsageRecord(
            cluster="bulk",
            slurm_job_id=100_000 + n,
            run_start=start + timedelta(minutes=20 * n),
            run_end=start + timedelta(minutes=20 * n + 10),
            gpu_type=types[n % 3],
            user=user,
            state="COMPLETED",
            seconds=600,
            gpu_count=1,
            gpu_seconds=600,
            invoice=draft,
            charged_at=timezone.now(),
            plan="pro",
            billable_gpu_seconds=600,
            amount_gpu=Decimal("0.9"),
            amount=Decimal("0.9"),
        )
        for n in range(count)
    )


def test_the_queries_do_not_grow_with_the_records(alice, client):
    client.force_login(alice)

    def count():
        with CaptureQueriesContext(connection) as captured:
            response = client.get(URL)
        assert response.status_code == 200
        return len(captured), response.context["month"]

    _bulk_records(alice, 10)
    few, month = count()
    assert month.charges == Decimal("9.00")
    UsageRecord.objects.filter(user=alice).delete()
    _bulk_records(alice, 1000)
    many, month = count()
    assert month.charges == Decimal("900.00")
    assert sum(row.runs for row in month.days) == 1000
    assert many == few


def test_the_charges_tile_agrees_with_the_invoice_to_the_cent(alice, client):
    """Two runs of $1.004 each: the invoice bills $1.00 + $1.00 (each line rounded); the page
    used to show $2.01 (the exact sum rounded)."""
    from django.utils import timezone

    from billing.actions import invoicing
    from billing.models import Invoice
    from billing.tests.invoice_support import charge

    subscribe(alice, "enterprise")
    now = timezone.now()
    charge(alice, now, plan="enterprise", gpu_type="a100", billable=1, gpu_price=Decimal("1.004"))
    charge(alice, now, plan="enterprise", gpu_type="h100", billable=1, gpu_price=Decimal("1.004"))
    draft = Invoice.objects.get(user=alice, status=Invoice.Status.DRAFT)
    invoicing.refresh_draft(draft.pk)
    usage_lines = [line.amount for line in draft.lines.exclude(kind="plan_fee")]
    assert usage_lines == [Decimal("1.00"), Decimal("1.00")]
    client.force_login(alice)
    page = client.get("/billing/usage/")
    assert page.context["month"].charges == sum(usage_lines) == Decimal("2.00")
    assert "$2.00" in page.content.decode() and "$2.01" not in page.content.decode()


def test_the_projection_bills_the_fee_as_the_invoice_does(db, client):
    """Pro taken on the 6th of a 31-day month: the invoice bills 26/31 of $299 ($250.77); the
    page projected the whole $299."""
    from billing.actions import invoicing
    from billing.models import Invoice
    from billing.tests.invoice_support import charge
    from billing.usage.usage_page import month_usage
    from conftest import _person

    with time_machine.travel(datetime(2026, 7, 6, 9, tzinfo=UTC), tick=False):
        carol = _person("carol", plan="pro")
        month = month_usage(carol)
        assert month.plan_fee == Decimal("250.77") and month.projected_total == month.projected_usage + month.plan_fee
        charge(carol, datetime(2026, 7, 6, 8, 30, tzinfo=UTC), plan="pro", billable=1, gpu_price=Decimal("1"))
        draft = Invoice.objects.get(user=carol, status=Invoice.Status.DRAFT)
        fee = [line.amount for line in invoicing.lines_for(draft) if line.kind == "plan_fee"]
        assert fee == [month.plan_fee]
        client.force_login(carol)
        assert "$250.77 plan fee" in client.get("/billing/usage/").content.decode()
