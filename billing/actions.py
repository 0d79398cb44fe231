"""Billing's writes: the only entry for views, the API, tasks, the admin and other apps.

Each touches several tables and is atomic; where a person acts it is audited
(docs/architecture.md, "The skeleton of an app"). The bodies live beside the rules they apply
(charging.py prices a record, closing.py closes a month, invoicing.py freezes and voids,
payments.py records money received); billing's own modules call those directly, everyone else
calls these. gpupool/tests/test_layers.py holds every caller outside billing's internals to it.
"""

from __future__ import annotations

from datetime import date, datetime
from decimal import Decimal

from billing import charging, credit_limits
from billing.invoices import closing, invoicing, payments
from billing.models import CreditLimit, Invoice, UsageRecord
from billing.usage import reserved_time


def charge(record_id: int, *, prices: charging.PriceBook | None = None) -> bool:
    """Charge one usage record to its owner's draft: priced by the plan held at the run's
    start, credits first, included hours next. True when charged now, False when it already
    was; ChargeError (nothing written) when it cannot be priced."""
    return charging.charge(record_id, prices=prices)


def close_month(period: date, *, now: datetime | None = None) -> closing.Closing:
    """Issue every draft of `period` and earlier (fee payers without a draft get one);
    ValueError before the month may close. Repeating it issues nothing twice."""
    return closing.close(period, now=now)


def issue_invoice(invoice_id: int, *, actor=None) -> Invoice:
    """Refresh, freeze and number a draft; a draft already issued is returned as it is."""
    return invoicing.issue_invoice(invoice_id, actor=actor)


def void_invoice(invoice_id: int, *, actor, reason: str) -> Invoice:
    """issued -> void with a reason; its usage moves once to a redraft that an admin issues."""
    return invoicing.void_invoice(invoice_id, actor, reason)


def record_payment(
    invoice_id: int,
    amount: Decimal | str,
    *,
    idempotency_key: str,
    actor,
    reference: str = "",
    received_at: datetime | None = None,
    method: str = "manual",
) -> payments.PaymentResult:
    """Record money received on an issued invoice (`amount` a Decimal or a form's text, checked
    there); the same key twice records it once. PaymentError, nothing written, when refused."""
    return payments.provider(method).record_payment(
        invoice_id, amount, idempotency_key=idempotency_key, actor=actor, reference=reference, received_at=received_at
    )


def approve_credit_limit(user, amount: Decimal, *, actor, reason: str) -> CreditLimit:
    """Set what a pay-afterwards user may owe; audited."""
    return credit_limits.approve_credit_limit(user, amount, actor=actor, reason=reason)


def meter_reservation(reservation, now: datetime | None = None) -> UsageRecord | None:
    """Write and charge an ended reservation's unused reserved time, once."""
    return reserved_time.meter_reservation(reservation, now)
