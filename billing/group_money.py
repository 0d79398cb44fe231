"""A group's money: what its invoice has charged this month, its budget's warnings and hold,
its unpaid invoices' hold, and each member's share.

A group pays for the runs charged to it while it holds a plan (groups.GroupPlan; the charge
decides per run, by the plan held at the run's start: billing/actions/charging.py). Then:
- its **budget** (groups.GroupBudget) counts the exact amounts of the records on the group's
  invoice of the month, like a user's budget counts theirs (billing/actions/budgets.py): an e-mail to
  the PI and managers at 80 % and at 100 %, each once a month (claimed by a conditional
  UPDATE), and, when asked, new group jobs held while it is spent;
- an issued group invoice unpaid after INVOICE_DUE_DAYS holds new group jobs;
- the member's own budget, credit limit and unpaid invoices do not hold a group job (the
  member does not pay for it), and group-paid runs never count against them.
Both holds are submission checks (jobs.submission.checks), registered in billing/apps.py.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Count, Sum
from django.urls import reverse
from django.utils import timezone

from accounts.access import is_admin
from billing.actions import invoicing
from billing.actions.budgets import check_pending, release, warn_once
from billing.actions.credit_limits import overdue_invoice
from billing.invoices.drafts import month_of, month_records
from billing.pricing import to_cents
from credits.actions import ledger
from groups import actions as group_actions
from groups.group_plans import current as current_group_plan
from groups.group_plans import group_pays
from groups.models import MANAGING_ROLES, GroupBudget, GroupPlan, Membership
from groups.queries import GroupError, sees_everyone
from jobs.submission.checks import SubmissionRefused
from plans.catalog import PlanSnapshot

log = logging.getLogger(__name__)
ZERO = Decimal(0)


def month_to_date_charges(group_id: int, period: date) -> Decimal:
    """Exact: the amounts of the records on the group's invoice of `period`."""
    return month_records(period, group_id=group_id).aggregate(total=Sum("amount"))["total"] or ZERO


def member_shares(group_id: int, period: date, *, member_id: int | None = None) -> list[dict]:
    """What each member's group runs cost the group in the month `period` (exact amounts and
    GPU-seconds by member and GPU type, from the group's invoice of that month). `member_id`:
    that member's rows only (what a member sees of the group's bill)."""
    rows = month_records(period, group_id=group_id)
    if member_id is not None:
        rows = rows.filter(user_id=member_id)
    return list(
        rows.values("user_id", "user__username", "gpu_type")
        .annotate(runs=Count("id"), gpu_seconds=Sum("gpu_seconds"), amount=Sum("amount"))
        .order_by("user__username", "gpu_type")
    )


@dataclass(frozen=True)
class MoneySeen:
    """A group's money as one person may see it (the money page and its API): everyone's shares,
    the month's charges and the pool for the PI, managers and admins; a member their own share."""

    month: date
    everyone: bool
    held: GroupPlan | None
    budget: GroupBudget | None
    spent: Decimal | None
    pool: int | None
    shares: list[dict]
    fee: Decimal | None = None  # the plan fee the group's invoice bills this month (pro rata)

    @property
    def invoiced_so_far(self) -> Decimal | None:
        """Usage to the cent plus the plan fee: what the group's invoice says so far."""
        return None if self.spent is None else to_cents(self.spent) + (self.fee or ZERO)

    @property
    def shown_total(self) -> Decimal:
        """The shares shown, summed and rounded to the cent."""
        return to_cents(sum((row["amount"] or ZERO for row in self.shares), ZERO))


def money_seen_by(user, group, month: date) -> MoneySeen:
    everyone = sees_everyone(user, group)
    return MoneySeen(
        month=month,
        everyone=everyone,
        held=current_group_plan(group.pk),
        budget=GroupBudget.objects.filter(group=group).first(),
        spent=month_to_date_charges(group.pk, month) if everyone else None,
        pool=ledger.balance(None, group_id=group.pk) if everyone else None,
        shares=member_shares(group.pk, month, member_id=None if everyone else user.pk),
        fee=invoicing.month_fee(month, group_id=group.pk) if everyone else None,
    )


def require_pool_admin(actor, group_id: int) -> None:
    """Credits go into a group's pool from the pool's admins, never from one in the group."""
    if not is_admin(actor):
        raise GroupError("group", "Credits are added to a group's pool by the pool's admins.", 403)
    group_actions.refuse_own_group(actor, group_id, "adds its credits")


def pool_key(group_id: int, submission_key: str) -> str:
    """The ledger's idempotency key of one submission (a form, an API call) to the group's pool."""
    return f"group-pool:{group_id}:{submission_key}"


def group_hold_check(user, plan: PlanSnapshot, group=None, work=None) -> None:
    """A submission check: refuse a job charged to a paying group whose invoice is overdue or
    whose held budget is spent."""
    if group is None or not group_pays(group.pk):
        return
    invoice = overdue_invoice(group_id=group.pk)
    if invoice is not None:
        raise SubmissionRefused(
            f"{group.name}'s invoice {invoice.number} (${invoice.total}) is unpaid after "
            f"{settings.INVOICE_DUE_DAYS} days: new jobs charged to the group are held until it is paid. "
            "Running jobs are not affected."
        )
    budget = GroupBudget.objects.filter(group=group, hold_at_limit=True).first()
    if budget is None:
        return
    period = month_of(timezone.now())
    spent = month_to_date_charges(group.pk, period)
    if spent >= budget.monthly_amount:
        raise SubmissionRefused(
            f"{group.name}'s monthly budget of ${budget.monthly_amount} is spent (${to_cents(spent)} charged in "
            f"{period:%B %Y}) and the group holds new jobs at the limit. The group's PI or a manager can raise it "
            "or turn the hold off; running jobs are not affected."
        )


def _managers_addresses(group_id: int) -> list[str]:
    return sorted(
        set(
            Membership.objects.active()
            .filter(group_id=group_id, role__in=MANAGING_ROLES)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    )


def _send(budget: GroupBudget, percent: int, spent: Decimal, period: date, claimed: dict) -> None:
    recipients = _managers_addresses(budget.group_id)
    if not recipients:
        return
    page = settings.SITE_URL + reverse("groups:detail", args=[budget.group_id])
    try:
        send_mail(
            subject=f"[GPU pool] {budget.group.name}: {percent} % of the monthly budget used",
            message=(
                f"{budget.group.name}'s GPU pool charges for {period:%B %Y} are ${to_cents(spent)}, {percent} % or "
                f"more of its monthly budget of ${budget.monthly_amount}.\n"
                + (
                    "New jobs charged to the group are held until next month, or until the budget is raised.\n"
                    if percent >= 100 and budget.hold_at_limit
                    else ""
                )
                + f"\nThe group: {page}\n"
            ),
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=recipients,
        )
    except Exception:
        release(budget, claimed, period)
        log.exception("budget e-mail for group %s failed; it will be tried again", budget.group_id)
        raise


def check_group_budget(group_id: int, now: datetime | None = None) -> int | None:
    """The 80 % or 100 % e-mail, once a month each (as billing.actions.budgets.check_budget)."""
    period = month_of(now or timezone.now())
    budget = GroupBudget.objects.select_related("group").filter(group_id=group_id).first()
    if budget is None or budget.warned_100_for == period:
        return None
    return warn_once(budget, month_to_date_charges(group_id, period), period, _send)


def check_group_budgets() -> int:
    """Beat (with the users' budgets): every group budget not yet warned at 100 % this month."""
    return check_pending(GroupBudget, "group_id", check_group_budget)
