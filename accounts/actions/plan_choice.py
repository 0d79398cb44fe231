"""A user's own plan: what it is, what else is offered, and the changes a user may make
(switch to another offered plan, pause and resume a plan with a monthly fee). The page
(`/settings/plan/`) and the API (`/api/v1/plan`) both go through here; the write is
`accounts.actions.lifecycle.change_plan` (history row, audit entry, Slurm limits on commit).

Fees are by day: each day is billed to every subscription that held any moment of it in the
billing zone (billing.actions.invoicing), so a change today is billed from today (both plans pay the
day of a switch). A paused plan is not charged for the days it was paused all day, and its new
jobs are refused (jobs.actions). A user makes at most PLAN_CHANGES_PER_DAY changes in any 24
hours (each one rewrites Slurm limits and opens a fee line); a further one is refused with the
time the next is possible.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from accounts.actions import lifecycle
from plans.catalog import monthly_price_for, plan_for, snapshot
from plans.models import Plan, Subscription, billing_month, billing_zone, fee_in_force, first_of_next_billing_month
from plans.rates import CardBook, gpu_prices_for_plan

ACTIONS = ("switch", "pause", "resume")


class PlanChoiceError(ValueError):
    """A change the user may not make; nothing was written. `field` names the bad input."""

    def __init__(self, field: str, message: str, status: int = 400):
        super().__init__(message)
        self.field = field
        self.message = message
        self.status = status


@dataclass(frozen=True)
class OfferedPlan:
    code: str
    name: str
    monthly_price: Decimal  # in force this month
    next_monthly_price: Decimal | None  # from next month, when an admin changed it
    included_gpu_hours: dict[str, int]
    # Pay-per-second plans only (no monthly fee, hours not a cap: Enterprise): the GPU prices of
    # the rate card the plan pays, in force now.
    rates_per_second: dict[str, Decimal]
    gpu_quota: dict[str, int]
    max_job_hours: Decimal
    official_images_only: bool
    included_nvme_gb: int
    current: bool

    @property
    def terms(self) -> list[str]:
        """The plan in a few lines a person reads."""
        lines = [
            f"{hours:,} GPU-hours of {_label(gpu)} a month included" for gpu, hours in self.included_gpu_hours.items()
        ]
        if self.included_nvme_gb:
            lines.append(f"{self.included_nvme_gb:,} GB of NVMe cache included")
        # The hour beside the second, to compare with the list prices, which are said by the hour.
        lines += [
            f"{_label(gpu)} at ${rate.normalize():f} a GPU-second (${rate * 3600:.2f} an hour)"
            for gpu, rate in self.rates_per_second.items()
        ]
        if self.gpu_quota:
            lines.append("At once: " + ", ".join(f"{count} {_label(gpu)}" for gpu, count in self.gpu_quota.items()))
        if self.code in settings.PAY_AFTERWARDS_PLANS:
            lines.append("Billed after each month, within a credit limit an admin approves")
        lines.append(
            f"Jobs up to {self.max_job_hours.normalize():f} h"
            + (", official images only" if self.official_images_only else "")
        )
        return lines


def _label(gpu_type: str) -> str:
    return settings.GPU_TYPES.get(gpu_type, {}).get("label", gpu_type)


@dataclass(frozen=True)
class PlanStanding:
    code: str
    name: str
    status: str
    since: object  # datetime of the current subscription row, None without one
    monthly_price: Decimal
    can_pause: bool
    can_resume: bool
    offered: list[OfferedPlan]


def _offer(plan: Plan, current_code: str, cards: CardBook) -> OfferedPlan:
    terms = snapshot(plan)  # the catalogue's one reading of a plan's GPU rows
    per_second = plan.fee_now <= 0 and not plan.included_hours_are_a_cap
    return OfferedPlan(
        code=plan.code,
        name=plan.name,
        monthly_price=plan.fee_now,
        next_monthly_price=plan.fee_next if plan.fee_next != plan.fee_now else None,
        included_gpu_hours=dict(terms.included_gpu_hours),
        rates_per_second=gpu_prices_for_plan(terms, cards) if per_second else {},
        gpu_quota=dict(terms.gpu_quota),
        max_job_hours=Decimal(plan.max_job_minutes) / 60,
        official_images_only=plan.official_images_only,
        included_nvme_gb=plan.included_nvme_gb,
        current=plan.code == current_code,
    )


def offered_plans(current_code: str = "") -> list[OfferedPlan]:
    """The plans anyone may choose, priced for this month and the next (the plan page, the
    public landing page)."""
    plans = (
        Plan.objects.filter(available=True)
        .prefetch_related("gpu_types")
        .annotate(
            fee_now=fee_in_force(billing_month(), plan_ref="pk"),
            fee_next=fee_in_force(first_of_next_billing_month(), plan_ref="pk"),
        )
        # Cheapest first (no fee before any), as a price list reads.
        .order_by(F("fee_now").asc(nulls_first=True), "pk")
    )
    cards = CardBook()  # each card code read once for all the plans
    return [_offer(plan, current_code, cards) for plan in plans]


def standing(user) -> PlanStanding:
    current = plan_for(user)
    row = Subscription.objects.filter(user=user, ended_at__isnull=True).values("started_at").first()
    price = monthly_price_for(current.code, billing_month())
    offered = offered_plans(current.code)
    return PlanStanding(
        code=current.code,
        name=current.name,
        status=current.status,
        since=row["started_at"] if row else None,
        monthly_price=price,
        can_pause=current.status == Subscription.Status.ACTIVE and price > 0,
        can_resume=current.status == Subscription.Status.PAUSED,
        offered=offered,
    )


def choose(user, action: str, plan_code: str = "") -> Subscription:
    """Apply the user's choice; PlanChoiceError (nothing written) when it is not allowed."""
    if action not in ACTIONS:
        raise PlanChoiceError("action", f"Choose one of {', '.join(ACTIONS)}.")
    with transaction.atomic():
        # The user's row lock serialises one user's changes, so five at once count as five (the
        # current subscription row would not do: it is replaced by the change it guards).
        get_user_model().objects.select_for_update().filter(pk=user.pk).first()
        _check_change_allowance(user)
        return _choose(user, action, plan_code)


def _check_change_allowance(user) -> None:
    limit = settings.PLAN_CHANGES_PER_DAY
    now = timezone.now()
    rows = Subscription.objects.filter(user=user).order_by("started_at", "id").values_list("started_at", flat=True)
    changes = [started for started in list(rows)[1:] if started > now - timedelta(days=1)]  # the first row is sign-up
    if len(changes) >= limit:
        next_possible = changes[-limit] + timedelta(days=1)
        raise PlanChoiceError(
            "action",
            f"You have changed your plan {len(changes)} times in the last 24 hours, the most allowed; "
            f"the next change is possible from {next_possible.astimezone(billing_zone()):%-d %B %Y %H:%M %Z}.",
            409,
        )


def _choose(user, action: str, plan_code: str) -> Subscription:
    current = plan_for(user)
    if action == "switch":
        if not plan_code:
            raise PlanChoiceError("plan", "Choose one of the plans offered.")
        plan = Plan.objects.filter(code=plan_code, available=True).first()
        if plan is None:
            raise PlanChoiceError("plan", f"No plan {plan_code!r} is offered.", status=404)
        if plan.code == current.code:
            raise PlanChoiceError("plan", f"You are on {plan.name} already.", status=409)
        return _change(user, plan.code, Subscription.Status.ACTIVE, f"switched from {current.code}")
    if action == "pause":
        if current.status != Subscription.Status.ACTIVE:
            raise PlanChoiceError("action", f"Your {current.name} plan is not active, so it cannot be paused.", 409)
        if monthly_price_for(current.code, billing_month()) <= 0:
            raise PlanChoiceError("action", f"{current.name} has no monthly fee: there is nothing to pause.", 409)
        return _change(user, current.code, Subscription.Status.PAUSED, "paused")
    if current.status != Subscription.Status.PAUSED:
        raise PlanChoiceError("action", f"Your {current.name} plan is not paused.", 409)
    return _change(user, current.code, Subscription.Status.ACTIVE, "resumed")


def _change(user, code: str, status: str, reason: str) -> Subscription:
    started = lifecycle.change_plan(user, code, actor=user, status=status, reason=f"{reason} by the user")
    if started is None:  # a concurrent request made the same change first
        raise PlanChoiceError("action", "That change has just been made.", 409)
    return started


def takes_effect() -> date:
    """The first day billed under a change made now: today (a day is billed to every plan that
    held any moment of it)."""
    return timezone.now().astimezone(billing_zone()).date()
