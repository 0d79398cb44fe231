"""Manual payments: the one that covers the total marks the invoice paid; an idempotency key
records a payment once; bad amounts and states are refused and change nothing; audited."""

from datetime import date
from decimal import Decimal

import pytest

from audit.models import AuditLog
from billing.actions import invoicing
from billing.actions.payments import ManualPayments, PaymentError, provider
from billing.models import Invoice, Payment
from billing.tests.invoice_support import at, subscription_history

pytestmark = pytest.mark.django_db


@pytest.fixture
def issued(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    draft = Invoice.objects.create(user=alice, period=date(2026, 3, 1))
    return invoicing.issue_invoice(draft.pk)


def test_payments_that_cover_the_total_mark_the_invoice_paid(issued, admin_user):
    payments = provider("manual")
    first = payments.record_payment(issued.pk, "100.00", idempotency_key="k1", actor=admin_user, reference="wire 1")
    assert first.created and first.invoice.status == Invoice.Status.ISSUED
    second = payments.record_payment(issued.pk, Decimal("199.00"), idempotency_key="k2", actor=admin_user)
    assert second.invoice.status == Invoice.Status.PAID and second.invoice.paid_at is not None
    entries = AuditLog.objects.filter(action="invoice.payment", target=f"invoice:{issued.number}")
    assert [entry.parameters["amount"] for entry in entries.order_by("id")] == ["100.00", "199.00"]
    assert entries.order_by("id").last().after["status"] == "paid"


def test_the_same_key_records_one_payment(issued, admin_user):
    payments = ManualPayments()
    first = payments.record_payment(issued.pk, "50.00", idempotency_key="form-1", actor=admin_user)
    again = payments.record_payment(issued.pk, "50.00", idempotency_key="form-1", actor=admin_user)
    assert (again.created, again.payment.pk) == (False, first.payment.pk)
    assert Payment.objects.count() == 1
    with pytest.raises(PaymentError) as refused:
        payments.record_payment(issued.pk, "60.00", idempotency_key="form-1", actor=admin_user)
    assert refused.value.field == "idempotency_key"


@pytest.mark.parametrize(
    ("amount", "field"),
    [("0", "amount"), ("-5", "amount"), ("1.001", "amount"), ("abc", "amount"), ("299.01", "amount"), (1.5, "amount")],
)
def test_bad_amounts_are_refused_and_change_nothing(issued, admin_user, amount, field):
    with pytest.raises(PaymentError) as refused:
        ManualPayments().record_payment(issued.pk, amount, idempotency_key="x", actor=admin_user)
    assert refused.value.field == field
    assert not Payment.objects.exists()
    assert Invoice.objects.get(pk=issued.pk).status == Invoice.Status.ISSUED


def test_only_issued_invoices_take_payments(issued, admin_user):
    invoicing.void_invoice(issued.pk, admin_user, "duplicate")
    with pytest.raises(PaymentError, match="void"):
        ManualPayments().record_payment(issued.pk, "10.00", idempotency_key="v", actor=admin_user)
    with pytest.raises(PaymentError, match="unknown payment method"):
        provider("card")
