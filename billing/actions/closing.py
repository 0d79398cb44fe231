"""Closing a month: every draft of the month is issued once the month is over.

The beat task `close_month` runs hourly. A month is closed once it has ended in the billing
zone and `BILLING_CLOSE_GRACE` (default 2 h, for slurmdbd's late records) has passed. Then:
1. users who owe a plan fee for the month but have no invoice for it yet (no usage) get a
   draft, so they are invoiced too;
2. every draft of that month or earlier is issued (`invoicing.issue_invoice`), one
   transaction each, under its row lock.
Safe to run twice: the second run finds no drafts (issuing skips what is already issued), and
a user whose invoice of the month exists (even void) gets no second one from the closer.
Usage charged after its month was issued goes on the next month's draft (billing.invoices.drafts).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing.actions import invoicing
from billing.invoices.drafts import month_bounds, month_of
from billing.models import Invoice
from groups.queries import owned_by
from plans.models import Subscription

log = logging.getLogger(__name__)


def grace() -> timedelta:
    return getattr(settings, "BILLING_CLOSE_GRACE", timedelta(hours=2))


def previous_month(period: date) -> date:
    return date(period.year - 1, 12, 1) if period.month == 1 else date(period.year, period.month - 1, 1)


def closable_month(now: datetime) -> date:
    """The latest month whose end, plus the grace period, is not after `now`."""
    return previous_month(month_of(now - grace()))


@dataclass(frozen=True)
class Closing:
    period: date
    drafts_created: int
    issued: list[str]


def _charged_payers(rows, owner: str, period: date) -> list[int]:
    by_payer: dict[int, list] = {}
    for row in rows:
        by_payer.setdefault(getattr(row, owner), []).append(row)
    return sorted(
        payer for payer, held in by_payer.items() if invoicing.charged_stretches(invoicing.day_stretches(held, period))
    )


def fee_payers_without_invoice(period: date) -> list[int]:
    """Users with a charged plan-fee day in the month and no invoice of the month at all."""
    # NOT IN over a NULL (a group's invoice has no user) would match nothing: leave them out.
    invoiced = Invoice.objects.filter(period=period, user__isnull=False).values("user_id")
    candidates = (
        invoicing.month_subscriptions(period)
        .filter(fee_in_force__gt=0, status=Subscription.Status.ACTIVE)
        .exclude(user_id__in=invoiced)
        .values("user_id")
    )
    return _charged_payers(invoicing.month_subscriptions(period, candidates), "user_id", period)


def fee_paying_groups_without_invoice(period: date) -> list[int]:
    """Groups whose plan had a charged fee day in the month and no invoice of the month."""
    invoiced = Invoice.objects.filter(period=period, group__isnull=False).values("group_id")
    candidates = (
        invoicing.month_group_plans(period).filter(fee_in_force__gt=0).exclude(group_id__in=invoiced).values("group_id")
    )
    return _charged_payers(invoicing.month_group_plans(period, candidates), "group_id", period)


def _create_draft(period: date, *, user_id: int | None = None, group_id: int | None = None) -> bool:
    payer = owned_by(user_id, group_id)
    try:
        with transaction.atomic():
            if Invoice.objects.filter(**payer, period=period).exists():
                return False
            Invoice.objects.create(**payer, period=period)
    except IntegrityError:
        return False  # charging made it meanwhile: it is issued below all the same
    return True


def close(period: date, *, now: datetime | None = None) -> Closing:
    """Issue every draft of `period` and earlier; refused (ValueError) before the month may close."""
    now = now or timezone.now()
    if month_bounds(period)[1] + grace() > now:
        raise ValueError(f"{period:%Y-%m} cannot close before {month_bounds(period)[1] + grace():%Y-%m-%d %H:%M %Z}")
    created = sum(_create_draft(period, user_id=user_id) for user_id in fee_payers_without_invoice(period))
    created += sum(_create_draft(period, group_id=group_id) for group_id in fee_paying_groups_without_invoice(period))
    issued = []
    # A redraft of a voided invoice waits for an admin (billing.actions.invoicing.void_invoice).
    drafts = Invoice.objects.filter(status=Invoice.Status.DRAFT, period__lte=period, replaces__isnull=True)
    drafts = drafts.order_by("period", "id")
    for invoice_id in drafts.values_list("pk", flat=True):
        invoice = invoicing.issue_invoice(invoice_id)
        issued.append(invoice.number)
    return Closing(period=period, drafts_created=created, issued=issued)


def close_month(period: str | None = None) -> str:
    """Beat, hourly: close the latest month that may close (or `period`, "YYYY-MM")."""
    if period:
        year, month = (int(part) for part in period.split("-"))
        target = date(year, month, 1)
    else:
        target = closable_month(timezone.now())
    result = close(target)
    if result.issued:
        log.info("closed %s: %d invoices issued", f"{target:%Y-%m}", len(result.issued))
    return f"{target:%Y-%m}: {result.drafts_created} drafts created, {len(result.issued)} issued"


def refresh_drafts() -> int:
    """Beat: rebuild the lines of drafts with usage charged since they were last built."""
    count = 0
    for invoice_id in invoicing.stale_drafts().values_list("pk", flat=True):
        invoicing.refresh_draft(invoice_id)
        count += 1
    return count
