"""Who may run up a bill: new submissions are held (running jobs are never touched) when

1. an invoice of the user's is overdue: issued more than INVOICE_DUE_DAYS ago and not paid in
   full; whatever the plan;
2. the plan bills afterwards (PAY_AFTERWARDS_PLANS: Enterprise, priced by the second and
   invoiced after the month) and no admin approved a credit limit for the account;
3. what the account owes reaches that limit: this month's charges (the exact amounts charged
   to its open drafts) plus its issued invoices' totals less the payments against them.

Each refusal says why and what to do; reaching the limit also e-mails the user once a month
(claimed by a conditional UPDATE of `warned_for`, so of two requests only one sends). The check
runs inside every submission's profile lock (jobs.submission.checks), so raising the limit or
recording a payment lets the next submission through at once.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from audit.log import record
from billing.invoices.drafts import month_of
from billing.invoices.payments import paid_so_far
from billing.models import CreditLimit, Invoice, Payment, UsageRecord
from billing.pricing import to_cents
from groups.group_plans import group_pays
from groups.queries import owned_by
from jobs.submission.checks import SubmissionRefused
from plans.catalog import PlanSnapshot

log = logging.getLogger(__name__)
ZERO = Decimal(0)


def owed(user_id: int) -> Decimal:
    """Exact: open drafts' charged usage plus issued invoices' totals less their payments."""
    drafted = UsageRecord.objects.filter(invoice__user_id=user_id, invoice__status=Invoice.Status.DRAFT).aggregate(
        total=Sum("amount")
    )["total"]
    issued = Invoice.objects.filter(user_id=user_id, status=Invoice.Status.ISSUED)
    billed = issued.aggregate(total=Sum("total"))["total"]
    paid = Payment.objects.filter(invoice__in=issued).aggregate(total=Sum("amount"))["total"]
    return (drafted or ZERO) + (billed or ZERO) - (paid or ZERO)


def overdue_invoice(user_id: int | None = None, *, group_id: int | None = None) -> Invoice | None:
    """An issued invoice of the user's (or the group's) unpaid after INVOICE_DUE_DAYS."""
    due_before = timezone.now() - timedelta(days=settings.INVOICE_DUE_DAYS)
    payer = owned_by(user_id, group_id)
    for invoice in Invoice.objects.filter(**payer, status=Invoice.Status.ISSUED, issued_at__lt=due_before):
        if paid_so_far(invoice.pk) < invoice.total:
            return invoice
    return None


def credit_limit_check(user, plan: PlanSnapshot, group=None) -> None:
    """A submission check (jobs.submission.checks): see the module. A job a group pays for is
    held by the group's unpaid invoices instead (billing.group_money)."""
    if group is not None and group_pays(group.pk):
        return
    invoice = overdue_invoice(user.pk)
    if invoice is not None:
        raise SubmissionRefused(
            f"Invoice {invoice.number} (${invoice.total}, issued {invoice.issued_at:%-d %B %Y}) is unpaid after "
            f"{settings.INVOICE_DUE_DAYS} days: new jobs are held until it is paid. Running jobs are not affected."
        )
    if plan.code not in settings.PAY_AFTERWARDS_PLANS:
        return
    limit = CreditLimit.objects.filter(user=user, approved_at__isnull=False).first()
    if limit is None:
        raise SubmissionRefused(
            f"The {plan.name} plan is billed afterwards, so it needs a credit limit approved by an admin "
            "before it runs jobs. Ask an admin, or switch to a plan with included hours or credits."
        )
    now_owed = owed(user.pk)
    if now_owed >= limit.amount:
        _warn_once(user, limit, now_owed)
        raise SubmissionRefused(
            f"Your account owes ${to_cents(now_owed)}, which reaches its credit limit of ${limit.amount}: new jobs "
            "are held until a payment is recorded or an admin raises the limit. Running jobs are not affected."
        )


def _warn_once(user, limit: CreditLimit, now_owed: Decimal) -> None:
    month = month_of(timezone.now())
    claimed = CreditLimit.objects.filter(pk=limit.pk).exclude(warned_for=month).update(warned_for=month)
    if not claimed or not user.email:
        return

    def send():
        try:
            send_mail(
                "GPU pool: credit limit reached, new jobs held",
                f"Your account owes ${to_cents(now_owed)}, which reaches its credit limit of ${limit.amount}.\n"
                "New jobs are held until a payment is recorded or an admin raises the limit; running jobs go on.\n",
                settings.DEFAULT_FROM_EMAIL,
                [user.email],
            )
        except Exception:
            log.exception("credit limit e-mail to user %s failed; sent again next time", user.pk)
            CreditLimit.objects.filter(pk=limit.pk, warned_for=month).update(warned_for=None)

    transaction.on_commit(send)


def approve_credit_limit(user, amount: Decimal, *, actor, reason: str) -> CreditLimit:
    """Set (or change) what `user` may owe, approved by `actor` now; audited."""
    with transaction.atomic():
        before = CreditLimit.objects.select_for_update().filter(user=user).first()
        approval = {"amount": amount, "reason": reason, "approved_by": actor, "approved_at": timezone.now()}
        limit, _ = CreditLimit.objects.update_or_create(user=user, defaults=approval)
        record(
            actor,
            "billing.credit_limit",
            f"user {user.pk}",
            before={"amount": str(before.amount)} if before else {},
            after={"amount": str(amount)},
            reason=reason,
        )
    return limit
