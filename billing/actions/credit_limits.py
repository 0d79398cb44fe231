"""Who may run up a bill: new submissions are held (running jobs are never touched) when

1. an invoice of the user's is overdue: issued more than INVOICE_DUE_DAYS ago and not paid in
   full; whatever the plan;
2. the plan bills afterwards (PAY_AFTERWARDS_PLANS: Enterprise, priced by the second and
   invoiced after the month) and no admin approved a credit limit for the account;
3. what the account owes reaches that limit: this month's charges (the exact amounts charged
   to its open drafts) plus its issued invoices' totals less the payments against them;
4. the work asked (a job, a sweep's tasks, a session; each its whole time limit, by the one
   quote, billing/quotes.py) costs more than the limit leaves after what is owed and the
   account's work not charged yet: running jobs at their estimate so far (billing/costs.py)
   and queued ones (sweep tasks included) at their quote for their time limit. Work charged to
   a group that pays is the group's, not counted here.

Each refusal says why and what to do; reaching the limit also e-mails the user once a month
(claimed by a conditional UPDATE of `warned_for`, so of two requests only one sends).

Work already accepted is held too (`hold_work_at_limits`, on beat): once what the account owes
plus its running work's estimate so far reaches the limit, no more of its waiting jobs may start
(sweep tasks included: Slurm's MaxJobs=0 on the user's own association on every cluster where
the portal made it), running ones go on, and the owner and the admins get one e-mail; a payment
recorded or a limit raised lifts it at the next pass. Group-paid work is the group's: untouched. The check
runs inside every submission's profile lock (jobs.submission.checks), so raising the limit or
recording a payment lets the next submission through at once.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from decimal import Decimal

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Count, Sum
from django.utils import timezone

from accounts.models import ClusterAccount, Role
from audit.log import record
from billing.actions.payments import paid_so_far
from billing.costs import held_by, job_costs
from billing.invoices.drafts import month_of
from billing.models import CreditLimit, Invoice, Payment, UsageRecord
from billing.pricing import PricingError, to_cents
from billing.quotes import quote_job, quote_spec, shards_for
from cluster.clusters.services import slurm_cli
from cluster.errors import SlurmCommandError
from cluster.records.gres import requested_gpus
from foundation.money import usd
from groups.group_plans import group_pays, paying_groups
from groups.queries import owned_by
from jobs.models import Job, JobState
from jobs.submission.checks import SubmissionRefused
from plans.catalog import PlanSnapshot
from plans.rates import NoRateCard

log = logging.getLogger(__name__)
ZERO = Decimal(0)
QUEUED_OR_RUNNING = (JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING)


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


def outstanding_work(user) -> Decimal:
    """Exact: the user's own work not charged yet (rule 4 of the module): running jobs at their
    estimate so far, queued ones at their quote for the whole time limit (one quote per shape)."""
    unfinished = Job.objects.filter(owner=user, state__in=QUEUED_OR_RUNNING).exclude(group__in=paying_groups())
    total = _running_estimate(user)
    shapes = (
        unfinished.exclude(state=JobState.RUNNING)
        .values("gpu_type", "tres_per_node", "time_limit_minutes", "qos")
        .annotate(runs=Count("pk"))
        .order_by()
    )
    for shape in shapes:
        quoted = _quote_shape(user, shape)
        total += quoted if quoted is not None else ZERO
    return total


def _quote_shape(user, shape: dict) -> Decimal | None:
    gpu_type, whole, shards, nvme = held_by(
        Job(
            gpu_type=shape["gpu_type"],
            tres_per_node=shape["tres_per_node"],
            gpu_count=requested_gpus(shape["tres_per_node"])[1],
        )
    )
    if not gpu_type or not (whole or shards) or not shape["time_limit_minutes"]:
        return None
    _shards, _per_gpu, shard_gb = shards_for(gpu_type, 1)
    try:
        quoted = quote_job(
            user,
            gpu_type=gpu_type,
            gpu_count=whole,
            gpu_memory_gb=shards * shard_gb,
            nvme_gb=nvme,
            seconds=shape["time_limit_minutes"] * 60,
            spot=bool(settings.SPOT_QOS) and shape["qos"] == settings.SPOT_QOS,
            runs=shape["runs"],
        )
    except (NoRateCard, PricingError):
        return None
    return quoted.payable


def _quote_work(user, work, group) -> Decimal | None:
    """What the work asked would cost the user at most (None: it cannot be priced)."""
    try:
        return quote_spec(user, work.spec, runs=work.runs, group=group).payable
    except (NoRateCard, PricingError):
        return None


def credit_limit_check(user, plan: PlanSnapshot, group=None, work=None) -> None:
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
    if work is None:
        return
    asked = _quote_work(user, work, group)
    if not asked:
        return
    unfinished = outstanding_work(user)
    left = limit.amount - now_owed - unfinished
    if asked > left:
        what = f"These {work.runs} tasks" if work.runs > 1 else "This job"
        raise SubmissionRefused(
            f"{what} could cost up to {usd(to_cents(asked))} (every run its whole time limit). Your account owes "
            f"{usd(to_cents(now_owed))} and has {usd(to_cents(unfinished))} of running and queued work, so its credit "
            f"limit of {usd(limit.amount)} leaves {usd(to_cents(max(left, ZERO)))}. Shorten the time limit or run "
            "fewer tasks, or ask an admin to raise the limit."
        )


def _running_estimate(user) -> Decimal:
    running = list(Job.objects.filter(owner=user, state=JobState.RUNNING).exclude(group__in=paying_groups()))
    return sum((cost.cost_so_far or ZERO for cost in job_costs(running).values()), ZERO)


def _set_start_hold(user, held: bool) -> None:
    """MaxJobs on the user's own association on the portal's cluster and every further cluster
    where the portal made their account. Raises SlurmError (the beat's next pass tries again)."""
    name = user.profile.cluster_username
    if not name:
        return
    clusters = [None, *ClusterAccount.objects.filter(profile__user=user, provisioned_at__isnull=False)
                .values_list("cluster", flat=True)]  # fmt: skip
    for cluster in clusters:
        result = slurm_cli(cluster).hold_user_starts(name, settings.SLURM_ACCOUNT, held)
        if result.returncode != 0 and "Nothing modified" not in (result.stdout + result.stderr):
            raise SlurmCommandError(f"sacctmgr did not {'hold' if held else 'release'} {name}: {result.stderr[:300]}")


def hold_work_at_limits() -> dict[str, int]:
    """Beat: hold the waiting work of every account whose debt and running work reached its
    approved limit, release those back under it (see the module). Idempotent."""
    held = released = 0
    for limit in CreditLimit.objects.filter(approved_at__isnull=False).select_related("user__profile"):
        user = limit.user
        owing = owed(user.pk) + _running_estimate(user)
        at_limit = owing >= limit.amount
        if at_limit and limit.work_held_at is None:
            _set_start_hold(user, True)
            if CreditLimit.objects.filter(pk=limit.pk, work_held_at__isnull=True).update(work_held_at=timezone.now()):
                _tell_held(user, limit, owing)
                held += 1
        elif not at_limit and limit.work_held_at is not None:
            _set_start_hold(user, False)
            CreditLimit.objects.filter(pk=limit.pk).update(work_held_at=None)
            released += 1
    return {"held": held, "released": released}


def _tell_held(user, limit: CreditLimit, owing: Decimal) -> None:
    admins = list(
        get_user_model()
        .objects.filter(is_active=True, profile__role=Role.ADMIN)
        .exclude(email="")
        .values_list("email", flat=True)
    )
    body = (
        f"The account {user.get_username()} owes ${to_cents(owing)} with its running work, which reaches its "
        f"credit limit of ${limit.amount}. Its waiting jobs (sweep tasks included) are held and start once a payment "
        "is recorded or an admin raises the limit; running jobs go on.\n"
    )
    for to in ([user.email] if user.email else []) + admins:
        try:
            send_mail("GPU pool: credit limit reached, waiting jobs held", body, settings.DEFAULT_FROM_EMAIL, [to])
        except Exception:
            log.exception("the credit limit hold e-mail to %s failed", to)


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


def dataset_quota_gate(user, plan) -> str:
    """datasets.quota's gate: a plan billed afterwards stores nothing before an admin approved
    the account's credit limit (its storage is paid afterwards, like its GPU time)."""
    if plan.code not in settings.PAY_AFTERWARDS_PLANS:
        return ""
    if CreditLimit.objects.filter(user=user, approved_at__isnull=False).exists():
        return ""
    return (
        f"The {plan.name} plan's dataset storage is billed afterwards, so it needs a credit limit approved by an "
        "admin first. Ask an admin, or choose a plan that includes storage."
    )


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
