"""Monthly budgets: an e-mail at 80 % and at 100 %, each once a month, and, when the user
asks for it, new submissions held once the budget is spent.

What counts against a budget: the month's charges, i.e. the exact `amount` of the usage
records charged to the user's invoice of this billing month (billing.invoices.drafts; late records
of last month's runs that went on this month's draft count here, as they do on the invoice).
The plan fee is not usage and does not count; a run counts once it is metered and charged,
so a job still running is not in it (its estimate is on the job page).

E-mails: `check_budget(user_id)` is cheap and idempotent. `check_budgets` calls it for every
budget not yet warned at 100 % this month: the metering task runs it after a pass that charged
something (billing/tasks.py), and beat every five minutes for charges that came another way.
Each warning is claimed by a conditional UPDATE of `warned_80_for` / `warned_100_for` to this
month's first day, so of two workers only one sends; a failed send gives the claim back for
the next pass. Reaching 100 % with no 80 % e-mail sent yet sends only the 100 % one (and marks
both). Changing the amount starts the month's warnings afresh (they were about the old amount).

The hold is checked live at every submission (jobs.submission.checks): raising the budget,
clearing it or turning the hold off lets the next submission through at once.
"""

from __future__ import annotations

import logging
from datetime import date, datetime
from decimal import Decimal

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Q, Sum
from django.urls import reverse
from django.utils import timezone

from billing.invoices.drafts import month_of, month_records
from billing.models import Budget
from billing.pricing import to_cents
from groups.group_plans import group_pays
from jobs.submission.checks import SubmissionRefused
from plans.catalog import PlanSnapshot

log = logging.getLogger(__name__)

WARN_AT = Decimal("0.8")


def month_to_date_charges(user_id: int, period: date) -> Decimal:
    """Exact: the amounts of the records charged to the user's invoice of `period` (their own:
    group runs a group pays for are on the group's invoice and count against its budget)."""
    return month_records(period, user_id=user_id).aggregate(total=Sum("amount"))["total"] or Decimal(0)


def budget_url() -> str:
    return settings.SITE_URL + reverse("billing:budget")


def _claim(budget, field: str, period: date) -> bool:
    """Set `field` to `period` unless it already is: True for the one caller that did."""
    not_yet = Q(**{f"{field}__isnull": True}) | Q(**{f"{field}__lt": period})
    return bool(type(budget).objects.filter(not_yet, pk=budget.pk).update(**{field: period}))


def release(budget, fields: dict[str, date | None], period: date) -> None:
    """Give a month's warning back (its e-mail failed), so the next pass sends it."""
    for field, previous in fields.items():
        type(budget).objects.filter(pk=budget.pk, **{field: period}).update(**{field: previous})


def warn_once(budget, spent: Decimal, period: date, send) -> int | None:
    """The month's 80 % or 100 % warning of any budget row with `monthly_amount` and the
    `warned_80_for` / `warned_100_for` months (a user's Budget, a group's GroupBudget): claimed
    by a conditional UPDATE so one worker sends it, then `send(budget, percent, spent, period,
    claimed)` on commit. The percent, or None when none is due or another worker has it."""
    if spent >= budget.monthly_amount:
        percent, fields = 100, ["warned_100_for", "warned_80_for"]
    elif spent >= budget.monthly_amount * WARN_AT:
        percent, fields = 80, ["warned_80_for"]
    else:
        return None
    previous = {field: getattr(budget, field) for field in fields}
    if not _claim(budget, fields[0], period):
        return None  # another worker claimed it and sends it
    for other in fields[1:]:
        _claim(budget, other, period)
    # In a charging transaction the e-mail waits for the commit (now, outside one).
    transaction.on_commit(lambda: send(budget, percent, spent, period, previous), robust=True)
    return percent


def check_pending(model, owner_field: str, check) -> int:
    """Beat: `check(owner id)` for every budget of `model` not yet warned at 100 % this month;
    the number e-mailed. One failing owner does not stop the others."""
    period = month_of(timezone.now())
    pending = model.objects.filter(Q(warned_100_for__isnull=True) | Q(warned_100_for__lt=period))
    sent = 0
    for owner_id in pending.values_list(owner_field, flat=True).iterator():
        try:
            sent += check(owner_id) is not None
        except Exception:
            log.exception("budget check for %s %s failed", owner_field, owner_id)
    return sent


def _send(budget: Budget, percent: int, spent: Decimal, period: date, claimed: dict[str, date | None]) -> None:
    try:
        send_mail(
            subject=f"[GPU pool] {percent} % of your monthly budget used",
            message=(
                f"Your GPU pool charges for {period:%B %Y} are ${to_cents(spent)}, {percent} % or more of "
                f"your monthly budget of ${budget.monthly_amount}.\n"
                + (
                    "New job submissions are held until next month, or until you raise or clear the budget.\n"
                    if percent >= 100 and budget.hold_at_limit
                    else ""
                )
                + f"\nYour usage: {settings.SITE_URL}{reverse('billing:usage')}\nYour budget: {budget_url()}\n"
            ),
            from_email=settings.DEFAULT_FROM_EMAIL,
            recipient_list=[budget.user.email],
        )
    except Exception:
        # Give the month's warning back, so the next pass sends it.
        release(budget, claimed, period)
        log.exception("budget e-mail for user %s failed; it will be tried again", budget.user_id)
        raise


def check_budget(user_id: int, now: datetime | None = None) -> int | None:
    """Send the 80 % or 100 % e-mail if this month's charges reached it and it has not gone
    this month. Returns the percent e-mailed (80 or 100), or None. Idempotent."""
    period = month_of(now or timezone.now())
    budget = Budget.objects.select_related("user").filter(user_id=user_id).first()
    if budget is None or budget.warned_100_for == period or not budget.user.email:
        return None
    return warn_once(budget, month_to_date_charges(user_id, period), period, _send)


def hold_at_limit_check(user, plan: PlanSnapshot, group=None, work=None) -> None:
    """A submission check (jobs.submission.checks): refuse while a held budget is spent. A job
    a group pays for is held by the group's budget instead (billing.group_money)."""
    if group is not None and group_pays(group.pk):
        return
    budget = Budget.objects.filter(user=user, hold_at_limit=True).first()
    if budget is None:
        return
    period = month_of(timezone.now())
    spent = month_to_date_charges(user.pk, period)
    if spent >= budget.monthly_amount:
        raise SubmissionRefused(
            f"Your monthly budget of ${budget.monthly_amount} is spent (${to_cents(spent)} charged in "
            f"{period:%B %Y}), and you asked to hold new jobs at the limit. Raise or clear the budget, or "
            f"turn the hold off, on {reverse('billing:budget')}; running jobs are not affected."
        )


def save_budget(user, monthly_amount: Decimal, hold_at_limit: bool) -> Budget:
    """Set the user's budget. A new amount starts this month's warnings afresh."""
    with transaction.atomic():
        budget = Budget.objects.select_for_update().filter(user=user).first()
        if budget is None:
            budget = Budget(user=user)
        if budget.monthly_amount != monthly_amount:
            budget.warned_80_for = budget.warned_100_for = None
        budget.monthly_amount = monthly_amount
        budget.hold_at_limit = hold_at_limit
        budget.save()
    return budget


def clear_budget(user) -> bool:
    deleted, _ = Budget.objects.filter(user=user).delete()
    return bool(deleted)


def check_budgets() -> int:
    """Beat: check every budget not yet warned at 100 % this month; the number e-mailed."""
    return check_pending(Budget, "user_id", check_budget)
