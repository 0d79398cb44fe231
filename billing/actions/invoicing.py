"""Invoice lines from usage records and subscriptions; issuing, voiding.

A draft's lines are rebuilt from scratch (`refresh_draft`) from two sources, under the draft's
row lock, and frozen with the totals and a number when it is issued (`issue_invoice`).

**Days** (plan fees). Billing months are calendar months in the billing zone
(`billing.invoices.drafts.billing_zone`). A day belongs to every subscription row that held any moment
of it (00:00 to 00:00 in the billing zone): a subscription started at 10:00 on the 5th pays
the 5th; a plan changed at 14:00 pays that day under both plans; a pause from 23:59 to 00:01
pays both days (it used to pay neither, the day going to whoever held 00:00).
Consecutive days held by the same plan in the same state form a *stretch*:
- an active stretch of a plan with a monthly price is one fee line: price x days / days of the
  month (`pricing.pro_rata`); a whole month is the price itself. An upgrade or downgrade
  mid-month gives two stretches, so two fee lines, one per plan; a pause and resume gives two
  stretches of the same plan;
- a paused stretch is not charged; it is shown as a note line (amount 0);
- cancelled stretches, days without a subscription and free plans are not charged.
The fee is the plan's monthly price when the lines are built (frozen at issue).

**A group's invoice** (the group held a plan: billing/actions/charging.py) is built the same way from
the group's plan rows (groups.GroupPlan) and its records, summed per member as well: lines per
member and GPU type, each naming the member.

**Usage** (one aggregate query over the invoice's usage records, grouped by plan, GPU type and
prices; each record was priced and split when it was charged, see billing/models/usage.py):
- included: GPU-seconds covered by the plan's included hours, amount 0;
- GPU time: billable + credit-covered GPU-seconds x the GPU price. Under a plan with a monthly
  fee (Pro) this is an *overage* line: use beyond the plan at list prices; otherwise (Enterprise,
  pay per second) a GPU-time line;
- GPU memory (GB-s) and NVMe cache (GB-h) of the billable share, at their prices (the quantity
  shown is the records' amount / price; the amount is the records' exact amount);
- credits applied: minus the credit-covered GPU-seconds x the GPU price, one line per GPU-time
  line, naming the credits ledger's spend entries (`credit_entry_ids`: the seam for the credits
  issue); a line per group keeps each group's net at 0 or more after rounding;
- included hours follow the days paid (`prorated_hours_lines`): a paid plan held N days of the
  month includes hours x N / days of the month; what runs took of them beyond that is an
  overage line at the runs' price;
- "GPU-seconds only: no telemetry": a note where whole-GPU runs had no GPU-memory samples and
  were charged for GPU-seconds only;
- volume discount: `pricing.volume_discount` of each plan's month (its rounded usage lines net
  of its credits) under the tiers of the rate card the plan pays in force when the month starts
  (00:00 on the 1st in the billing zone; `plan_facts`), a negative line. Only the enterprise
  card has tiers (>= $5,000: 5 %, >= $10,000: 10 % of the whole); a card without tiers gives
  none, and a tier changed from a later date leaves the month under way alone.
The free plan bills nothing: its usage shows as included, its fee is 0.

**Rounding** (pricing's one rule): every line's exact amount is rounded half-up to the cent on
its own (`pricing.to_cents`); subtotal = the fee and usage lines, discount and credits = their
lines, total = the sum of all rounded lines. Lines of quantity and amount 0 are left out.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.db.models import Count, DecimalField, F, Q, Sum
from django.utils import timezone

from audit.log import record
from billing.invoices.drafts import billing_zone, month_bounds
from billing.models import Invoice, InvoiceLine, InvoiceNumber, UsageRecord
from billing.pricing import SECONDS_PER_HOUR, DiscountTier, days_in_month, pro_rata, to_cents, volume_discount
from groups.models import GroupPlan
from plans.models import Plan, Subscription, fee_in_force
from plans.rates import NoRateCard, rate_card_at

Kind = InvoiceLine.Kind
ZERO = Decimal(0)
NUMBER_FORMAT = "GP-{year}-{number:06d}"
SUMMARY_KINDS = {Kind.DISCOUNT: "discount", Kind.CREDITS: "credits"}


class InvoiceStateError(Exception):
    """The invoice is not in a state that allows this (e.g. voiding a draft)."""


@dataclass(frozen=True)
class Stretch:
    """Consecutive days of one month held by one plan in one state (see the docstring)."""

    plan_code: str
    plan_name: str
    monthly_price: Decimal
    status: str
    first_day: date
    last_day: date

    @property
    def days(self) -> int:
        return (self.last_day - self.first_day).days + 1


@dataclass(frozen=True)
class DraftLine:
    kind: str
    description: str
    quantity: Decimal
    unit: str
    unit_price: Decimal
    amount: Decimal  # rounded to the cent
    gpu_type: str = ""
    plan: str = ""
    credit_entry_ids: tuple[int, ...] = field(default=())
    member_id: int | None = None  # a group's invoice: whose runs the line bills


@dataclass(frozen=True)
class UsageGroup:
    """The invoice's usage records of one plan, GPU type and set of prices, summed in SQL."""

    plan: str
    gpu_type: str
    gpu_price: Decimal
    memory_price: Decimal
    nvme_price: Decimal
    runs: int
    included_gpu_seconds: int
    credit_gpu_seconds: int
    billable_gpu_seconds: int
    amount_gpu: Decimal
    amount_memory: Decimal
    amount_nvme: Decimal
    credit_value: Decimal
    runs_without_telemetry: int
    gpu_seconds_without_telemetry: int
    # A group's invoice sums per member too (lines per member and GPU type).
    member_id: int | None = None
    member: str = ""

    @property
    def key(self) -> tuple:
        return (self.plan, self.gpu_type, self.gpu_price, self.member_id)

    @property
    def label(self) -> str:
        gpu = self.gpu_type.upper() if self.gpu_type else "No GPU"
        return f"{self.member}: {gpu}" if self.member else gpu


@dataclass(frozen=True)
class PlanFacts:
    name: str
    monthly_price: Decimal
    included_hours: dict[str, int]
    # The volume discount tiers of the month: its card's in force when the month starts.
    discount_tiers: tuple[DiscountTier, ...] = ()


# --- days ------------------------------------------------------------------------------------


def day_stretches(rows, period: date) -> list[Stretch]:
    """The month's stretches from subscription rows (any iterable of objects with `plan`,
    `status`, `started_at`, `ended_at`): a day belongs to every row that held any moment of it
    (from 00:00 to the next 00:00 in the billing zone), so a plan paused from 23:59 to 00:01
    still pays both days, and a day of a switch pays both plans. A paused day of a plan is
    only a paused day where no active row of that plan touches it. Days no row holds are left
    out. Stretches come in order of their first day."""
    zone = billing_zone()
    month_days = days_in_month(period.year, period.month)
    days_of: dict[tuple, list[date]] = defaultdict(list)
    holders: dict[tuple, object] = {}
    for day_number in range(1, month_days + 1):
        day = period.replace(day=day_number)
        opens = datetime(day.year, day.month, day.day, tzinfo=zone)
        closes = datetime.combine(day + timedelta(days=1), datetime.min.time(), tzinfo=zone)
        touching = [row for row in rows if row.started_at < closes and (row.ended_at is None or row.ended_at > opens)]
        active = {row.plan.code for row in touching if row.status == Subscription.Status.ACTIVE}
        for row in sorted(touching, key=lambda row: row.started_at):
            if row.status == Subscription.Status.PAUSED and row.plan.code in active:
                continue
            key = (row.plan.code, row.status)
            if not days_of[key] or days_of[key][-1] != day:
                days_of[key].append(day)
            holders[key] = holders.get(key, row)
    stretches = []
    for key, days in days_of.items():
        first = previous = days[0]
        for day in [*days[1:], None]:
            if day is not None and day == previous + timedelta(days=1):
                previous = day
                continue
            stretches.append(_stretch((key, first, previous, holders[key])))
            first = previous = day
    return sorted(stretches, key=lambda stretch: (stretch.first_day, stretch.plan_code, stretch.status))


def _stretch(current) -> Stretch:
    _key, first, last, row = current
    # The price in force on the month's first day (month_subscriptions annotates it; plans.models.PlanPrice).
    price = getattr(row, "fee_in_force", None)
    return Stretch(
        row.plan.code, row.plan.name, row.plan.monthly_price if price is None else price, row.status, first, last
    )


def _held_in_month(rows, period: date, owner_field: str, ids):
    """Plan rows (anything with `plan`, `started_at`, `ended_at`) that overlap the month, of
    the owners `ids` (ids or a subquery), with their plans and the fee in force that month."""
    start, end = month_bounds(period)
    rows = rows.filter(started_at__lt=end).filter(Q(ended_at__isnull=True) | Q(ended_at__gt=start))
    if ids is not None:
        rows = rows.filter(**{f"{owner_field}__in": ids})
    # A plan's new price is billed from a later month on: each month pays the one in force then.
    return rows.select_related("plan").annotate(fee_in_force=fee_in_force(period))


def month_subscriptions(period: date, user_ids=None):
    """Subscription rows that overlap the month (of `user_ids`: ids or a subquery), with plans."""
    return _held_in_month(Subscription.objects.all(), period, "user_id", user_ids)


def month_group_plans(period: date, group_ids=None):
    """A group's plan rows that overlap the month (groups.GroupPlan), as month_subscriptions."""
    return _held_in_month(GroupPlan.objects.all(), period, "group_id", group_ids)


def charged_stretches(stretches) -> list[Stretch]:
    return [s for s in stretches if s.status == Subscription.Status.ACTIVE and s.monthly_price > 0]


# --- lines (pure) ----------------------------------------------------------------------------


def _day_span(stretch: Stretch) -> str:
    if stretch.first_day == stretch.last_day:
        return f"{stretch.first_day:%-d %b %Y}"
    return f"{stretch.first_day:%-d}–{stretch.last_day:%-d %b %Y}"


def fee_lines(stretches, period: date) -> list[DraftLine]:
    month_days = days_in_month(period.year, period.month)
    lines = []
    for stretch in stretches:
        if stretch.monthly_price <= 0:
            continue
        if stretch.status == Subscription.Status.ACTIVE:
            whole = stretch.days == month_days
            lines.append(
                DraftLine(
                    kind=Kind.PLAN_FEE,
                    description=f"{stretch.plan_name} plan, {_day_span(stretch)}"
                    + ("" if whole else f" ({stretch.days} of {month_days} days)"),
                    quantity=pro_rata(Decimal(1), stretch.days, month_days),
                    unit="month",
                    unit_price=stretch.monthly_price,
                    amount=to_cents(pro_rata(stretch.monthly_price, stretch.days, month_days)),
                    plan=stretch.plan_code,
                )
            )
        elif stretch.status == Subscription.Status.PAUSED:
            lines.append(
                DraftLine(
                    kind=Kind.NOTE,
                    description=f"{stretch.plan_name} plan paused, {_day_span(stretch)} "
                    f"({stretch.days} days): not charged",
                    quantity=Decimal(stretch.days),
                    unit="day",
                    unit_price=ZERO,
                    amount=ZERO,
                    plan=stretch.plan_code,
                )
            )
    return lines


def _hours(seconds: int) -> str:
    return f"{Decimal(seconds) / 3600:,.2f} h"


def _per_unit(amount: Decimal, price: Decimal) -> Decimal:
    """The billed quantity behind an exact amount at one price (12 places; display only)."""
    if price <= 0:
        return ZERO
    return (amount / price).quantize(Decimal("1e-12"))


def usage_lines(groups, plans: dict[str, PlanFacts]) -> list[DraftLine]:
    lines: list[DraftLine] = []
    # One included line per member, GPU type and plan: the hours are one allowance, whatever
    # prices the runs were recorded at (a card changed mid-month, shard runs at the memory price).
    included: dict[tuple, int] = {}
    for group in groups:
        key = (group.member, group.gpu_type, group.plan)
        included[key] = included.get(key, 0) + group.included_gpu_seconds
    for group in sorted(
        groups, key=lambda g: (g.member, g.gpu_type, g.plan, g.gpu_price, g.memory_price, g.nvme_price)
    ):
        facts = plans.get(group.plan) or PlanFacts(group.plan or "no plan", ZERO, {})
        label = group.label
        common = {"gpu_type": group.gpu_type, "plan": group.plan, "member_id": group.member_id}
        seconds = included.pop((group.member, group.gpu_type, group.plan), 0)
        if seconds:
            allowance = facts.included_hours.get(group.gpu_type)
            of = f" of {allowance} h included in {facts.name}" if allowance else f" included in {facts.name}"
            description = f"{label}: {_hours(seconds)}{of}"
            lines.append(DraftLine(Kind.INCLUDED, description, Decimal(seconds), "GPU-s", ZERO, ZERO, **common))
        gpu_seconds = group.billable_gpu_seconds + group.credit_gpu_seconds
        if gpu_seconds or group.amount_gpu:
            overage = facts.monthly_price > 0
            lines.append(
                DraftLine(
                    Kind.OVERAGE if overage else Kind.GPU,
                    f"{label} GPU time beyond the {facts.name} plan (list prices)"
                    if overage
                    else f"{label} GPU time ({facts.name})",
                    Decimal(gpu_seconds),
                    "GPU-s",
                    group.gpu_price,
                    to_cents(group.amount_gpu + group.credit_value),
                    **common,
                )
            )
        if group.amount_memory:
            lines.append(
                DraftLine(
                    Kind.GPU_MEMORY,
                    f"{label} GPU memory",
                    _per_unit(group.amount_memory, group.memory_price),
                    "GB-s",
                    group.memory_price,
                    to_cents(group.amount_memory),
                    **common,
                )
            )
        if group.amount_nvme:
            lines.append(
                DraftLine(
                    Kind.NVME,
                    f"{label} NVMe cache",
                    _per_unit(group.amount_nvme, group.nvme_price),
                    "GB-h",
                    group.nvme_price,
                    to_cents(group.amount_nvme),
                    **common,
                )
            )
        if group.runs_without_telemetry:
            runs = group.runs_without_telemetry
            lines.append(
                DraftLine(
                    Kind.NOTE,
                    f"{label}: GPU-seconds only: no telemetry ({runs} run{'s' if runs != 1 else ''}, "
                    f"{group.gpu_seconds_without_telemetry:,} GPU-s without GPU-memory samples)",
                    Decimal(group.gpu_seconds_without_telemetry),
                    "GPU-s",
                    ZERO,
                    ZERO,
                    **common,
                )
            )
    return lines


def credit_lines(groups, credit_entries: dict[tuple, list[int]]) -> list[DraftLine]:
    lines = []
    for group in sorted(groups, key=lambda g: (g.member, g.gpu_type, g.plan, g.gpu_price)):
        if not group.credit_gpu_seconds:
            continue
        label = group.label
        lines.append(
            DraftLine(
                Kind.CREDITS,
                f"Credits applied: {label}, {group.credit_gpu_seconds:,} GPU-seconds",
                Decimal(group.credit_gpu_seconds),
                "GPU-s",
                group.gpu_price,
                -to_cents(group.credit_value),
                gpu_type=group.gpu_type,
                plan=group.plan,
                credit_entry_ids=tuple(sorted(set(credit_entries.get(group.key, ())))),
                member_id=group.member_id,
            )
        )
    return lines


def discount_lines(lines, plans: dict[str, PlanFacts]) -> list[DraftLine]:
    """The volume discount of each plan whose month has discount tiers, on its month net of
    credits."""
    spend: dict[str, Decimal] = defaultdict(Decimal)
    for line in lines:
        if line.plan in plans and plans[line.plan].discount_tiers and line.kind != Kind.PLAN_FEE:
            spend[line.plan] += line.amount
    found = []
    for plan, month_spend in sorted(spend.items()):
        discount = volume_discount(max(month_spend, ZERO), plans[plan].discount_tiers)
        if not discount.rate:
            continue
        name = plans[plan].name
        found.append(
            DraftLine(
                Kind.DISCOUNT,
                f"Volume discount: {discount.rate * 100:.0f} % of ${month_spend:,.2f} {name} usage this month",
                month_spend,
                "USD",
                discount.rate,
                -to_cents(discount.amount),
                plan=plan,
            )
        )
    return found


def prorated_hours_lines(stretches, groups, plans: dict[str, PlanFacts], period: date) -> list[DraftLine]:
    """Included hours follow the days paid: a paid plan held for N days of the month includes
    hours x N / days of the month (whole seconds, rounded down). Charging grants a current
    subscription the whole month's hours as runs come (a plan held to the month's end pays
    every day left); what the invoice's runs took of them beyond the days actually paid (a
    plan bought on the last day, or paused or left early) is billed here at the price of the
    runs that took them, as overage. Free plans (no fee) are capped by Slurm, not here."""
    month_days = days_in_month(period.year, period.month)
    paid_days: dict[str, int] = defaultdict(int)
    for stretch in charged_stretches(stretches):
        paid_days[stretch.plan_code] += stretch.days
    used: dict[tuple[str, str], list[UsageGroup]] = defaultdict(list)
    for group in groups:
        if group.included_gpu_seconds:
            used[(group.plan, group.gpu_type)].append(group)
    lines = []
    for (plan_code, gpu_type), taken in sorted(used.items()):
        facts = plans.get(plan_code)
        if facts is None or facts.monthly_price <= 0 or gpu_type not in facts.included_hours:
            continue
        days = min(paid_days.get(plan_code, 0), month_days)
        allowance = facts.included_hours[gpu_type] * SECONDS_PER_HOUR * days // month_days
        excess = sum(group.included_gpu_seconds for group in taken) - allowance
        if excess <= 0:
            continue
        price = max(group.gpu_price for group in taken)
        label = gpu_type.upper()
        lines.append(
            DraftLine(
                Kind.OVERAGE,
                f"{label} included hours beyond the {days} paid day{'s' if days != 1 else ''} of {facts.name} "
                f"({_hours(excess)}, list price)",
                Decimal(excess),
                "GPU-s",
                price,
                to_cents(excess * price),
                gpu_type=gpu_type,
                plan=plan_code,
            )
        )
    return lines


def build_lines(period, stretches, groups, plans, credit_entries) -> list[DraftLine]:
    """Every line of an invoice, in order: fees, usage by GPU type, included hours beyond the
    days paid, credits, discounts."""
    lines = fee_lines(stretches, period) + usage_lines(groups, plans)
    lines += prorated_hours_lines(stretches, groups, plans, period)
    lines += credit_lines(groups, credit_entries)
    lines += discount_lines(lines, plans)
    return [line for line in lines if line.quantity or line.amount]


@dataclass(frozen=True)
class Totals:
    subtotal: Decimal
    discount: Decimal
    credits: Decimal
    total: Decimal


def totals(lines) -> Totals:
    discount = sum((line.amount for line in lines if line.kind == Kind.DISCOUNT), ZERO)
    credits = sum((line.amount for line in lines if line.kind == Kind.CREDITS), ZERO)
    total = sum((line.amount for line in lines), ZERO)
    return Totals(subtotal=total - discount - credits, discount=discount, credits=credits, total=total)


# --- reading the database ----------------------------------------------------------------------


def _by(by_member: bool) -> tuple[str, ...]:
    keys = ("plan", "gpu_type", "gpu_price", "memory_price", "nvme_price")
    return (*keys, "user_id", "user__username") if by_member else keys


def usage_groups(invoice_id: int, *, by_member: bool = False) -> list[UsageGroup]:
    """The invoice's usage records summed in one query, by plan, GPU type and prices (and
    member, for a group's invoice)."""
    money = DecimalField(max_digits=30, decimal_places=12)
    no_telemetry = Q(gpu_memory_source=UsageRecord.MemorySource.NONE, gpu_seconds__gt=0)
    rows = (
        UsageRecord.objects.filter(invoice_id=invoice_id)
        .values(*_by(by_member))
        .annotate(
            runs=Count("id"),
            sum_included_gpu_seconds=Sum("included_gpu_seconds"),
            sum_credit_gpu_seconds=Sum("credit_gpu_seconds"),
            sum_billable_gpu_seconds=Sum("billable_gpu_seconds"),
            sum_amount_gpu=Sum("amount_gpu"),
            sum_amount_memory=Sum("amount_memory"),
            sum_amount_nvme=Sum("amount_nvme"),
            sum_credit_value=Sum(F("credit_gpu_seconds") * F("gpu_price"), output_field=money),
            runs_without_telemetry=Count("id", filter=no_telemetry),
            sum_gpu_seconds_without_telemetry=Sum("gpu_seconds", filter=no_telemetry),
        )
        .order_by(*_by(by_member))
    )
    return [_group(row) for row in rows]


def _group(row: dict) -> UsageGroup:
    def number(name):
        return row[name] or 0

    def money(name):
        return Decimal(row[name] or 0)

    return UsageGroup(
        plan=row["plan"],
        gpu_type=row["gpu_type"],
        gpu_price=row["gpu_price"],
        memory_price=row["memory_price"],
        nvme_price=row["nvme_price"],
        runs=row["runs"],
        included_gpu_seconds=number("sum_included_gpu_seconds"),
        credit_gpu_seconds=number("sum_credit_gpu_seconds"),
        billable_gpu_seconds=number("sum_billable_gpu_seconds"),
        amount_gpu=money("sum_amount_gpu"),
        amount_memory=money("sum_amount_memory"),
        amount_nvme=money("sum_amount_nvme"),
        credit_value=money("sum_credit_value"),
        runs_without_telemetry=row["runs_without_telemetry"],
        gpu_seconds_without_telemetry=number("sum_gpu_seconds_without_telemetry"),
        member_id=row.get("user_id"),
        member=row.get("user__username") or "",
    )


def credit_entries(invoice_id: int, *, by_member: bool = False) -> dict[tuple, list[int]]:
    entries: dict[tuple, list[int]] = defaultdict(list)
    rows = (
        UsageRecord.objects.filter(invoice_id=invoice_id, credit_entry_id__isnull=False)
        .values_list("plan", "gpu_type", "gpu_price", "user_id", "credit_entry_id")
        .distinct()
    )
    for plan, gpu_type, gpu_price, user_id, entry in rows:
        entries[(plan, gpu_type, gpu_price, user_id if by_member else None)].append(entry)
    return entries


def month_discount_tiers(rate_card: str, period: date) -> tuple[DiscountTier, ...]:
    """The volume discount tiers that govern the month `period` for a plan paying `rate_card`:
    those of the card in force when the month starts (00:00 on its 1st in the billing zone), so
    a card dated mid-month changes the tiers from the next month on. None without a card then."""
    start, _end = month_bounds(period)
    try:
        return rate_card_at(rate_card, start).discount_tiers
    except NoRateCard:
        return ()


def plan_facts(codes, period: date) -> dict[str, PlanFacts]:
    """The plans as they were for the month `period`: its fee is the price in force then, its
    discount tiers those of the plan's card in force when it started."""
    plans = (
        Plan.objects.filter(code__in=set(codes))
        .prefetch_related("gpu_types")
        .annotate(fee_in_force=fee_in_force(period, plan_ref="pk"))
    )
    tiers: dict[str, tuple[DiscountTier, ...]] = {}
    facts = {}
    for plan in plans:
        if plan.rate_card not in tiers:
            tiers[plan.rate_card] = month_discount_tiers(plan.rate_card, period)
        facts[plan.code] = PlanFacts(
            name=plan.name,
            monthly_price=plan.fee_in_force,
            included_hours={row.gpu_type: row.included_hours for row in plan.gpu_types.all() if row.included_hours},
            discount_tiers=tiers[plan.rate_card],
        )
    return facts


def payer_stretches(period: date, *, user_id: int | None = None, group_id: int | None = None) -> list[Stretch]:
    """The month's stretches of the plan a payer held: a group's plan rows, or a user's
    subscriptions."""
    held = month_group_plans(period, [group_id]) if group_id is not None else month_subscriptions(period, [user_id])
    return day_stretches(held, period)


def month_fee(period: date, *, user_id: int | None = None, group_id: int | None = None) -> Decimal:
    """The plan fee a payer's invoice of `period` bills, as its fee lines do (each plan for the
    days it was held, pro rata; paused days not at all), the plan held now assumed to the month's
    end."""
    stretches = payer_stretches(period, user_id=user_id, group_id=group_id)
    return sum((line.amount for line in fee_lines(stretches, period)), ZERO)


def lines_for(invoice: Invoice) -> list[DraftLine]:
    """The lines the invoice's records and the month's plans give now (no writes). A group's
    invoice: the group's plan rows pay the fee, and usage is summed per member."""
    by_member = invoice.group_id is not None
    stretches = payer_stretches(invoice.period, user_id=invoice.user_id, group_id=invoice.group_id)
    groups = usage_groups(invoice.pk, by_member=by_member)
    plans = plan_facts([group.plan for group in groups] + [stretch.plan_code for stretch in stretches], invoice.period)
    return build_lines(invoice.period, stretches, groups, plans, credit_entries(invoice.pk, by_member=by_member))


# --- writing ---------------------------------------------------------------------------------


def _rebuild(invoice: Invoice) -> Totals:
    """Replace a locked draft's lines and totals."""
    lines = lines_for(invoice)
    InvoiceLine.objects.filter(invoice=invoice).delete()
    InvoiceLine.objects.bulk_create(
        InvoiceLine(
            invoice=invoice,
            position=position,
            kind=line.kind,
            gpu_type=line.gpu_type,
            plan=line.plan,
            description=line.description[:200],
            quantity=line.quantity,
            unit=line.unit,
            unit_price=line.unit_price,
            amount=line.amount,
            credit_entry_ids=list(line.credit_entry_ids),
            member_id=line.member_id,
        )
        for position, line in enumerate(lines, start=1)
    )
    sums = totals(lines)
    now = timezone.now()
    Invoice.objects.filter(pk=invoice.pk, status=Invoice.Status.DRAFT).update(
        subtotal=sums.subtotal, discount=sums.discount, credits=sums.credits, total=sums.total, refreshed_at=now
    )
    invoice.subtotal, invoice.discount, invoice.credits, invoice.total = (
        sums.subtotal,
        sums.discount,
        sums.credits,
        sums.total,
    )
    invoice.refreshed_at = now
    return sums


def _locked(invoice_id: int) -> Invoice:
    return Invoice.objects.select_for_update().get(pk=invoice_id)


def refresh_draft(invoice_id: int) -> Invoice:
    """Rebuild a draft's lines and totals from its records and the month's subscriptions,
    under its row lock. An invoice no longer a draft is returned as it is (idempotent)."""
    with transaction.atomic():
        invoice = _locked(invoice_id)
        if invoice.status == Invoice.Status.DRAFT:
            _rebuild(invoice)
        return invoice


def is_stale(invoice: Invoice) -> bool:
    """A draft whose lines were built before the latest charge on it or the latest change of the
    plan its payer held this month (two queries at most)."""
    if invoice.status != Invoice.Status.DRAFT:
        return False
    if invoice.refreshed_at is None:
        return True
    since = invoice.refreshed_at
    held = (
        GroupPlan.objects.filter(group_id=invoice.group_id)
        if invoice.group_id
        else Subscription.objects.filter(user_id=invoice.user_id)
    )
    changed = held.filter(Q(started_at__gt=since) | Q(ended_at__gt=since))
    return UsageRecord.objects.filter(invoice=invoice, charged_at__gt=since).exists() or changed.exists()


def up_to_date(invoice: Invoice) -> Invoice:
    """The invoice as a page or the API should show it: a draft is rebuilt first when it is stale
    (is_stale), so its lines agree with the usage page and the job costs at the same moment
    instead of waiting for the beat's next refresh."""
    if not is_stale(invoice):
        return invoice
    refresh_draft(invoice.pk)
    invoice.refresh_from_db()
    return invoice


def next_number(year: int) -> str:
    """The year's next invoice number, gapless: the counter row is locked until the caller's
    transaction ends, so a rolled-back issue gives its number back."""
    InvoiceNumber.objects.bulk_create([InvoiceNumber(year=year)], ignore_conflicts=True)
    counter = InvoiceNumber.objects.select_for_update().get(year=year)
    counter.last += 1
    counter.save(update_fields=["last"])
    return NUMBER_FORMAT.format(year=year, number=counter.last)


def invoice_state(invoice: Invoice) -> dict:
    """An invoice as the audit log keeps it."""
    return {
        "number": invoice.number,
        "user": invoice.user_id,
        "group": invoice.group_id,
        "period": invoice.period.isoformat(),
        "status": invoice.status,
        "total": str(invoice.total),
    }


def issue_invoice(invoice_id: int, *, actor=None) -> Invoice:
    """Refresh, freeze and number a draft (issued); a total of 0 is paid at once. Under the
    draft's row lock, so a record being charged is on this invoice or on a later draft.
    An invoice already issued is returned as it is (closing may run twice)."""
    with transaction.atomic():
        invoice = _locked(invoice_id)
        if invoice.status != Invoice.Status.DRAFT:
            return invoice
        sums = _rebuild(invoice)
        now = timezone.now()
        number = next_number(now.astimezone(billing_zone()).year)
        paid = sums.total <= 0
        Invoice.objects.filter(pk=invoice.pk, status=Invoice.Status.DRAFT).update(
            status=Invoice.Status.PAID if paid else Invoice.Status.ISSUED,
            number=number,
            issued_at=now,
            paid_at=now if paid else None,
        )
        invoice.refresh_from_db()
        record(actor, "invoice.issue", f"invoice:{number}", after=invoice_state(invoice))
    return invoice


def void_invoice(invoice_id: int, actor, reason: str) -> Invoice:
    """issued -> void, with the reason the owner reads; audited. The number stays used.

    Void and redraft: in the same transaction a new draft of the same month (`replaces` the
    void one) takes every usage record of the void invoice, so the usage is billed once, on the
    redraft, and late records of that month land there too; its fee lines are built from the
    subscriptions as for any draft, so the month's fee is billed once. The closer leaves a
    redraft alone: an admin issues it once it is right (`issue_invoice`)."""
    reason = (reason or "").strip()
    if not reason:
        raise ValueError("a reason is required to void an invoice")
    if len(reason) > 200:
        raise ValueError("the reason is at most 200 characters")
    with transaction.atomic():
        invoice = _locked(invoice_id)
        before = invoice_state(invoice)
        changed = Invoice.objects.filter(pk=invoice.pk, status=Invoice.Status.ISSUED).update(
            status=Invoice.Status.VOID, voided_at=timezone.now(), void_reason=reason
        )
        if not changed:
            raise InvoiceStateError(f"only an issued, unpaid invoice can be voided; this one is {invoice.status}")
        redraft = Invoice.objects.create(
            user_id=invoice.user_id, group_id=invoice.group_id, period=invoice.period, replaces=invoice
        )
        moved = UsageRecord.objects.filter(invoice=invoice).update(invoice=redraft)
        refresh_draft(redraft.pk)
        invoice.refresh_from_db()
        record(
            actor,
            "invoice.void",
            f"invoice:{invoice.number}",
            before=before,
            after={**invoice_state(invoice), "redraft": redraft.pk, "usage_records_moved": moved},
            reason=reason,
        )
    return invoice


def stale_drafts():
    """Drafts never built, or with records charged since their lines were last built."""
    return (
        Invoice.objects.filter(status=Invoice.Status.DRAFT)
        .filter(Q(refreshed_at__isnull=True) | Q(usage_records__charged_at__gt=F("refreshed_at")))
        .distinct()
    )
