"""Payments: a small provider interface and its one implementation here, manual (an admin
records money received; no payment provider is reachable from the pool).

Every payment carries an idempotency key: recording the same key again (a double submit, a
retried request) returns the payment already recorded and changes nothing; the same key for a
different invoice or amount is refused. A payment is taken under the invoice's row lock, never
exceeds what is still owed, and the payment that covers the total marks the invoice paid.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from typing import Protocol

from django.db import IntegrityError, transaction
from django.db.models import Sum
from django.utils import timezone

from audit.log import record
from billing.actions.invoicing import invoice_state
from billing.models import Invoice, Payment
from billing.pricing import CENT


class PaymentError(ValueError):
    """A payment that cannot be recorded; `field` names the input at fault."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


@dataclass(frozen=True)
class PaymentResult:
    payment: Payment
    invoice: Invoice
    created: bool  # False: the idempotency key had been recorded already


class PaymentProvider(Protocol):
    method: str

    def record_payment(
        self,
        invoice_id: int,
        amount: Decimal,
        *,
        idempotency_key: str,
        actor,
        reference: str = "",
        received_at: datetime | None = None,
    ) -> PaymentResult: ...


def paid_so_far(invoice_id: int) -> Decimal:
    return Payment.objects.filter(invoice_id=invoice_id).aggregate(total=Sum("amount"))["total"] or Decimal(0)


def _amount(value) -> Decimal:
    if isinstance(value, float | bool):
        raise PaymentError("amount", "must be a decimal amount, not a float")
    try:
        amount = Decimal(str(value).strip())
    except (InvalidOperation, ValueError):
        raise PaymentError("amount", "must be a decimal amount such as 299.00") from None
    if not amount.is_finite() or amount <= 0:
        raise PaymentError("amount", "must be more than 0")
    if amount != amount.quantize(CENT):
        raise PaymentError("amount", "at most two decimal places (cents)")
    return amount.quantize(CENT)


class ManualPayments:
    """An admin records a payment received outside the portal (bank transfer, cheque)."""

    method = "manual"

    def record_payment(self, invoice_id, amount, *, idempotency_key, actor, reference="", received_at=None):
        amount = _amount(amount)
        key = (idempotency_key or "").strip()
        if not key or len(key) > 128:
            raise PaymentError("idempotency_key", "required, at most 128 characters")
        if len(reference) > 128:
            raise PaymentError("reference", "at most 128 characters")
        received_at = received_at or timezone.now()
        with transaction.atomic():
            invoice = Invoice.objects.select_for_update().get(pk=invoice_id)
            earlier = Payment.objects.filter(idempotency_key=key).first()
            if earlier is not None:
                return self._repeat(earlier, invoice, amount)
            if invoice.status != Invoice.Status.ISSUED:
                raise PaymentError("invoice", f"payments are recorded on issued invoices; this one is {invoice.status}")
            outstanding = invoice.total - paid_so_far(invoice.pk)
            if amount > outstanding:
                raise PaymentError("amount", f"at most the ${outstanding} still owed")
            try:
                with transaction.atomic():
                    payment = Payment.objects.create(
                        invoice=invoice,
                        amount=amount,
                        method=self.method,
                        reference=reference,
                        idempotency_key=key,
                        recorded_by=actor,
                        received_at=received_at,
                    )
            except IntegrityError:
                # The same key recorded by another request meanwhile (for another invoice:
                # this invoice's lock would have ordered the two).
                return self._repeat(Payment.objects.get(idempotency_key=key), invoice, amount)
            before = invoice_state(invoice)
            if amount == outstanding:
                Invoice.objects.filter(pk=invoice.pk, status=Invoice.Status.ISSUED).update(
                    status=Invoice.Status.PAID, paid_at=received_at
                )
                invoice.refresh_from_db()
            record(
                actor,
                "invoice.payment",
                f"invoice:{invoice.number}",
                before=before,
                after=invoice_state(invoice),
                parameters={
                    "amount": str(amount),
                    "method": self.method,
                    "reference": reference,
                    "idempotency_key": key,
                    "received_at": received_at.isoformat(),
                },
            )
        return PaymentResult(payment=payment, invoice=invoice, created=True)

    @staticmethod
    def _repeat(earlier: Payment, invoice: Invoice, amount: Decimal) -> PaymentResult:
        if earlier.invoice_id != invoice.pk or earlier.amount != amount:
            raise PaymentError("idempotency_key", "already used for a different payment")
        return PaymentResult(payment=earlier, invoice=invoice, created=False)


def provider(method: str = "manual") -> PaymentProvider:
    providers = {ManualPayments.method: ManualPayments}
    try:
        return providers[method]()
    except KeyError:
        raise PaymentError("method", f"unknown payment method {method!r}") from None


def record_payment(
    invoice_id: int,
    amount: Decimal | str,
    *,
    idempotency_key: str,
    actor,
    reference: str = "",
    received_at: datetime | None = None,
    method: str = "manual",
) -> PaymentResult:
    """Record money received on an issued invoice (`amount` a Decimal or a form's text, checked
    there) through `method`'s provider; the same key twice records it once. PaymentError,
    nothing written, when refused."""
    return provider(method).record_payment(
        invoice_id, amount, idempotency_key=idempotency_key, actor=actor, reference=reference, received_at=received_at
    )
