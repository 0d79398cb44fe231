"""Which invoice a moment's usage goes on, and the lock that orders one user's month.

Billing months are calendar months in `settings.BILLING_TIME_ZONE` (default: TIME_ZONE). A
record is charged to the draft of the month its run ended in; when that month's invoice has
already been issued (slurmdbd was late, or the month was closed early), to the next month
that still has a draft or none yet. Charging and closing both hold the draft's row lock, so
on PostgreSQL a record is either on the invoice being issued or on a later draft, never both
and never neither.
"""

from __future__ import annotations

from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.db import IntegrityError, transaction

from billing.models import Invoice, UsageRecord
from groups.queries import owned_by
from plans import models as plan_models


def billing_zone() -> ZoneInfo:
    return plan_models.billing_zone()  # one definition, below billing: plans' prices use it too


def month_of(moment: datetime) -> date:
    """The first day of the billing month `moment` (aware) falls in."""
    if moment.tzinfo is None:
        raise ValueError("moment must be timezone-aware")
    local = moment.astimezone(billing_zone())
    return date(local.year, local.month, 1)


def next_month(period: date) -> date:
    return date(period.year + period.month // 12, period.month % 12 + 1, 1)


def month_bounds(period: date) -> tuple[datetime, datetime]:
    """[start, end) of a billing month as aware datetimes."""
    zone = billing_zone()
    following = next_month(period)
    return (
        datetime(period.year, period.month, 1, tzinfo=zone),
        datetime(following.year, following.month, 1, tzinfo=zone),
    )


def month_records(period: date, *, user_id: int | None = None, group_id: int | None = None):
    """The usage records on the payer's live (not void) invoice of the month `period`: what its
    budget, its usage page and its members' shares count."""
    payer = owned_by(user_id, group_id, through="invoice")
    return UsageRecord.objects.filter(**payer, invoice__period=period).exclude(invoice__status=Invoice.Status.VOID)


def open_draft(user_id: int | None, moment: datetime, *, group_id: int | None = None) -> Invoice:
    """The draft that usage of `moment` goes on, locked (SELECT ... FOR UPDATE) until the
    caller's transaction ends: the month of `moment`, or the first later month not yet issued.
    The payer is the group when `group_id` is given, else the user. Created when missing.
    Must be called inside `transaction.atomic()`."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("open_draft holds a row lock: call it inside transaction.atomic()")
    payer = owned_by(user_id, group_id)
    period = month_of(moment)
    while True:
        live = (
            Invoice.objects.select_for_update()
            .filter(**payer, period=period)
            .exclude(status=Invoice.Status.VOID)
            .first()
        )
        if live is None:
            try:
                with transaction.atomic():  # a savepoint: another worker may create it first
                    Invoice.objects.create(**payer, period=period)
            except IntegrityError:
                pass
            continue  # read it again, now under the lock
        if live.status == Invoice.Status.DRAFT:
            return live
        period = next_month(period)
