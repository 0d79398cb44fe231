"""Invoice pages: own invoices only (404 for another's), PDF and CSV links, the page's queries
the same at 10 and at 10,000 lines; admins' billing pages (403 to others): revenue by month,
plan and GPU type, unpaid invoices, a payment recorded once per form, void with a reason."""

from datetime import date
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from audit.models import AuditLog
from billing.actions import invoicing
from billing.models import Invoice, InvoiceLine, Payment
from billing.tests.invoice_support import at, charge, subscription_history

pytestmark = pytest.mark.django_db
MARCH = date(2026, 3, 1)


@pytest.fixture
def march(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 5), plan="pro", gpu_type="h100", billable=1000, gpu_price=Decimal("0.004"))
    return invoicing.issue_invoice(Invoice.objects.get(user=alice, period=MARCH).pk)


def _draft_with_lines(user, count: int) -> Invoice:
    invoice = Invoice.objects.create(user=user, period=date(2025, 1, 1))
    InvoiceLine.objects.bulk_create(
        InvoiceLine(invoice=invoice, position=n, kind="gpu", description=f"line {n}", amount=Decimal("1.00"))
        for n in range(1, count + 1)
    )
    return invoice


def test_the_owner_sees_the_invoice_and_its_documents(client, alice, march):
    client.force_login(alice)
    listing = client.get("/billing/invoices/").content.decode()
    assert march.number in listing and f"/billing/invoices/{march.pk}/pdf" in listing
    page = client.get(f"/billing/invoices/{march.pk}/").content.decode()
    assert "H100 GPU time beyond the Pro plan" in page and "$303.00" in page
    pdf = client.get(f"/billing/invoices/{march.pk}/pdf")
    assert pdf.status_code == 200 and pdf.content.startswith(b"%PDF")
    assert (
        client.get(f"/billing/invoices/{march.pk}/csv").content.decode().count("\n") == 1 + 2 + 4
    )  # header, fee and H100 lines, totals


def test_someone_elses_invoice_is_not_found(client, bob, march):
    client.force_login(bob)
    for path in ("", "pdf", "csv"):
        assert client.get(f"/billing/invoices/{march.pk}/{path}").status_code == 404
    assert march.number not in client.get("/billing/invoices/").content.decode()


def test_the_invoice_page_costs_the_same_queries_at_10_and_10000_lines(client, alice):
    client.force_login(alice)
    counts = []
    for size in (10, 10_000):
        invoice = _draft_with_lines(alice, size)
        with CaptureQueriesContext(connection) as queries:
            response = client.get(f"/billing/invoices/{invoice.pk}/")
        assert response.status_code == 200
        counts.append(len(queries))
        invoice.delete()
    assert counts[0] == counts[1], counts


def test_admin_pages_are_for_admins_only(client, alice, marketer, march):
    for person in (alice, marketer):
        client.force_login(person)
        assert client.get("/billing/admin/").status_code == 403
        assert client.get(f"/billing/admin/invoices/{march.pk}/").status_code == 403
        assert client.post(f"/billing/admin/invoices/{march.pk}/void", {"reason": "x"}).status_code == 403
    assert Invoice.objects.get(pk=march.pk).status == Invoice.Status.ISSUED


def test_revenue_by_month_plan_and_gpu_type_and_unpaid(client, admin_user, march, bob):
    subscription_history(bob, ("enterprise", "active", at(2026, 1, 1)))
    charge(bob, at(2026, 3, 9), billable=400)  # a draft: not revenue
    client.force_login(admin_user)
    response = client.get("/billing/admin/")
    assert response.status_code == 200
    context = response.context
    assert [(row["period"], row["amount"]) for row in context["by_month"]] == [(MARCH, Decimal("303.00"))]
    assert [(row["plan"], row["amount"]) for row in context["by_plan"]] == [("pro", Decimal("303.00"))]
    assert [(row["gpu_type"], row["amount"]) for row in context["by_gpu_type"]] == [("h100", Decimal("4.00"))]
    assert [invoice.pk for invoice in context["unpaid"]] == [march.pk]
    assert "/static/vendor/plotly.min.js" in response.content.decode()


def test_an_admin_records_a_payment_once_and_voids_with_a_reason(client, admin_user, march):
    client.force_login(admin_user)
    form = client.get(f"/billing/admin/invoices/{march.pk}/")
    key = form.context["idempotency_key"]
    for _ in range(2):  # a double submit
        client.post(f"/billing/admin/invoices/{march.pk}/payment", {"amount": "100.00", "idempotency_key": key})
    assert Payment.objects.filter(invoice=march).count() == 1
    bad = client.post(f"/billing/admin/invoices/{march.pk}/payment", {"amount": "9999", "idempotency_key": "other"})
    assert bad.status_code == 302 and Payment.objects.count() == 1
    client.post(f"/billing/admin/invoices/{march.pk}/void", {"reason": ""})
    assert Invoice.objects.get(pk=march.pk).status == Invoice.Status.ISSUED
    client.post(f"/billing/admin/invoices/{march.pk}/void", {"reason": "sent to the wrong customer"})
    assert Invoice.objects.get(pk=march.pk).status == Invoice.Status.VOID
    assert set(AuditLog.objects.filter(actor=admin_user).values_list("action", flat=True)) == {
        "invoice.payment",
        "invoice.void",
    }


def test_a_draft_shows_a_charge_made_since_its_last_rebuild_at_once(alice, client, api_client_for):
    """The draft lagged the usage page by the beat's ten minutes."""
    import time_machine
    from django.utils import timezone

    from conftest import subscribe

    subscribe(alice, "enterprise")
    now = timezone.now()
    charge(alice, now, billable=3600)  # $9.00
    draft = Invoice.objects.get(user=alice, status=Invoice.Status.DRAFT)
    invoicing.refresh_draft(draft.pk)
    before = Invoice.objects.get(pk=draft.pk).subtotal  # $9.00 and the day's plan fees
    assert not invoicing.is_stale(Invoice.objects.get(pk=draft.pk))
    with time_machine.travel(now + timedelta_seconds(5), tick=False):
        charge(alice, now, billable=7200)  # $18.00 more, after the rebuild
    assert invoicing.is_stale(Invoice.objects.get(pk=draft.pk))
    client.force_login(alice)
    assert "$27.00" in client.get(f"/billing/invoices/{draft.pk}/").content.decode()  # the A100 line
    assert Invoice.objects.get(pk=draft.pk).subtotal == before + Decimal("18.00")
    with time_machine.travel(now + timedelta_seconds(10), tick=False):
        charge(alice, now, billable=400)  # $1.00 more
    body = api_client_for(alice).get(f"/api/v1/invoices/{draft.pk}/").json()
    assert Decimal(body["subtotal"]) == before + Decimal("19.00")


def timedelta_seconds(seconds):
    from datetime import timedelta

    return timedelta(seconds=seconds)
