"""A user's month on one page (/billing/usage): usage by day and GPU type, the plan's
included hours left, the charges so far and where the month is heading.

Which records, and why:
- The chart and the day table: the user's usage records whose run *ended* this billing month
  (billing.invoices.drafts' zone), by the day it ended: usage as it happened.
- Charges month-to-date and the included hours used: the records charged to the user's
  invoice of this month, which is what the invoice will bill (a run of last month that
  slurmdbd reported late is charged, and counts, here; billing.invoices.drafts). The same figure is
  what a budget is measured against (billing.actions.budgets).
- Included hours left, per GPU type of the plan: the plan's hours x 3600 minus the included
  GPU-seconds on this month's invoice, never below 0.
- The "charges so far" tile: this month's draft as the invoice bills it (billing.actions.invoicing's
  usage and credit lines, each rounded to the cent), so the page and the invoice agree to the
  cent; the exact sum (`charges_exact`) is what budgets and the projection use.
- Projected month-end cost: month-to-date charges / the days of the month so far (today
  counts as a whole day) x the days in the month, rounded half-up to the cent, plus the plan's
  monthly fee. A straight line: it leaves out jobs running now (not charged yet), credits to
  come and Enterprise's volume discount, which the invoice applies to the whole month.

Queries: a fixed number whatever the number of records; the sums are done in SQL, grouped by
day and GPU type (at most 31 x the pool's types rows).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Sum
from django.db.models.functions import TruncDate
from django.utils import timezone

from billing.actions import invoicing
from billing.invoices.drafts import billing_zone, month_bounds, month_of, month_records
from billing.models import Budget, Invoice, InvoiceLine, UsageRecord
from billing.pricing import days_in_month, to_cents
from plans.catalog import PlanSnapshot, plan_for

HOUR = Decimal(3600)
TWO_PLACES = Decimal("0.01")
NO_GPU = "no GPU"


@dataclass(frozen=True)
class DayRow:
    day: date
    gpu_type: str
    runs: int
    gpu_hours: Decimal  # to two places, for reading
    charges: Decimal  # to the cent, for reading


@dataclass(frozen=True)
class IncludedRow:
    gpu_type: str
    label: str
    hours: int
    used_hours: Decimal
    left_hours: Decimal

    @property
    def left_percent(self) -> int:
        return int(self.left_hours * 100 / self.hours) if self.hours else 0


@dataclass(frozen=True)
class MonthUsage:
    period: date
    today: date
    days_in_month: int
    days_so_far: int
    plan: PlanSnapshot
    # The plan's fee this month (the price in force on its first day).
    plan_fee: Decimal
    days: list[DayRow]
    included: list[IncludedRow]
    charges_exact: Decimal
    budget: Budget | None
    # The usage lines of this month's draft as the invoice bills them (each line rounded to
    # the cent, credits applied): the figure the page shows, so it and the invoice agree.
    invoiced_usage: Decimal = Decimal(0)

    @property
    def charges(self) -> Decimal:
        return self.invoiced_usage

    @property
    def projected_usage(self) -> Decimal:
        return to_cents(self.charges_exact * self.days_in_month / self.days_so_far)

    @property
    def projected_total(self) -> Decimal:
        return self.projected_usage + self.plan_fee

    @property
    def budget_percent(self) -> int | None:
        if self.budget is None:
            return None
        return int(self.charges_exact * 100 / self.budget.monthly_amount)

    def chart(self) -> dict:
        """The Plotly figure's data: every day of the month so far on the x axis, one trace
        per GPU type; numbers as decimal strings (Plotly reads them; no float is made here)."""
        days = [self.period + timedelta(days=n) for n in range(self.days_so_far)]
        types = sorted({row.gpu_type for row in self.days})
        cells = {(row.day, row.gpu_type): row for row in self.days}
        traces = []
        for gpu_type in types:
            rows = [cells.get((day, gpu_type)) for day in days]
            traces.append(
                {
                    "name": _label(gpu_type),
                    "gpu_hours": [str(row.gpu_hours) if row else "0" for row in rows],
                    "charges": [str(row.charges) if row else "0" for row in rows],
                }
            )
        return {
            "days": [day.isoformat() for day in days],
            # The whole month, half a day either side, so the first and last bars show whole.
            "x_range": [
                f"{self.period - timedelta(days=1)} 12:00",
                f"{self.period + timedelta(days=self.days_in_month - 1)} 12:00",
            ],
            "traces": traces,
        }


def _label(gpu_type: str) -> str:
    return gpu_type or NO_GPU


def _hours(seconds: int) -> Decimal:
    return (Decimal(seconds) / HOUR).quantize(TWO_PLACES)


def by_day(user_id: int, period: date) -> list[DayRow]:
    start, end = month_bounds(period)
    rows = (
        UsageRecord.objects.filter(user_id=user_id, run_end__gte=start, run_end__lt=end)
        # Runs a group pays for are on the group's invoice (and its money page), not the user's.
        .exclude(invoice__group__isnull=False)
        .annotate(day=TruncDate("run_end", tzinfo=billing_zone()))
        .values("day", "gpu_type")
        .annotate(runs=Count("id"), gpu_seconds=Sum("gpu_seconds"), charges=Sum("amount"))
        .order_by("day", "gpu_type")
    )
    return [
        DayRow(
            day=row["day"],
            gpu_type=row["gpu_type"],
            runs=row["runs"],
            gpu_hours=_hours(int(row["gpu_seconds"] or 0)),
            charges=to_cents(row["charges"] or Decimal(0)),
        )
        for row in rows
    ]


def invoice_month(user_id: int, period: date) -> tuple[Decimal, dict[str, int]]:
    """(exact charges, {GPU type: included GPU-seconds}) of the records on the user's own
    invoice of `period` (not a group's). One query."""
    rows = (
        month_records(period, user_id=user_id)
        .values("gpu_type")
        .annotate(charges=Sum("amount"), included=Sum("included_gpu_seconds"))
        .order_by()
    )
    charges, included = Decimal(0), {}
    for row in rows:
        charges += row["charges"] or Decimal(0)
        included[row["gpu_type"]] = int(row["included"] or 0)
    return charges, included


def month_usage(user, now: datetime | None = None) -> MonthUsage:
    now = now or timezone.now()
    period = month_of(now)
    today = now.astimezone(billing_zone()).date()
    plan = plan_for(user)
    charges, included_used = invoice_month(user.pk, period)
    included = []
    for gpu_type, hours in sorted(plan.included_gpu_hours.items()):
        used = included_used.get(gpu_type, 0)
        included.append(
            IncludedRow(
                gpu_type=gpu_type,
                label=settings.GPU_TYPES.get(gpu_type, {}).get("label", gpu_type),
                hours=hours,
                used_hours=_hours(used),
                left_hours=_hours(max(0, hours * 3600 - used)),
            )
        )
    return MonthUsage(
        period=period,
        today=today,
        days_in_month=days_in_month(period.year, period.month),
        days_so_far=today.day,
        plan=plan,
        # The fee as the invoice bills it (a plan taken on the 6th of a 31-day month: 26/31 of it).
        plan_fee=invoicing.month_fee(period, user_id=user.pk),
        days=by_day(user.pk, period),
        included=included,
        charges_exact=charges,
        budget=Budget.objects.filter(user=user).first(),
        invoiced_usage=invoiced_usage(user.pk, period),
    )


# What the invoice bills that is not usage: the plan fee and the volume discount on the whole month.
NOT_USAGE = frozenset({InvoiceLine.Kind.PLAN_FEE, InvoiceLine.Kind.DISCOUNT})


def invoiced_usage(user_id: int, period: date) -> Decimal:
    """The usage and credit lines of the user's draft of `period`, as built now (no writes)."""
    draft = Invoice.objects.filter(user_id=user_id, period=period, status=Invoice.Status.DRAFT).first()
    if draft is None:
        return Decimal(0)
    return sum((line.amount for line in invoicing.lines_for(draft) if line.kind not in NOT_USAGE), Decimal(0))
