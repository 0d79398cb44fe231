"""Usage records charged to their draft for invoice tests: the record's split and amounts are
given (what billing.actions.charging decides is tested with charging), the draft is the real one
(billing.invoices.drafts.open_draft, under its row lock)."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from billing.invoices.drafts import billing_zone, open_draft
from billing.models import UsageRecord
from plans.models import Plan, Subscription

_job_ids = itertools.count(700_000)


def at(year, month, day, hour=0, minute=0) -> datetime:
    return datetime(year, month, day, hour, minute, tzinfo=billing_zone())


def subscription_history(user, *changes):
    """Replace the user's subscriptions with rows (plan code, status, start), each ending when
    the next starts."""
    Subscription.objects.filter(user=user).delete()
    for index, (code, status, start) in enumerate(changes):
        end = changes[index + 1][2] if index + 1 < len(changes) else None
        Subscription.objects.create(
            user=user, plan=Plan.objects.get(code=code), status=status, started_at=start, ended_at=end
        )


def charge(
    user,
    run_end: datetime,
    *,
    gpu_type="a100",
    plan="enterprise",
    billable=3600,
    included=0,
    credit=0,
    gpu_price=Decimal("0.0025"),
    memory_gb_seconds=Decimal(0),
    memory_price=Decimal("0.00002"),
    nvme_gb_seconds=0,
    nvme_price=Decimal("0.02"),
    source=UsageRecord.MemorySource.TELEMETRY,
    credit_entry_id=None,
) -> UsageRecord:
    """A record of one run ending at `run_end`, charged to the user's open draft."""
    gpu_seconds = billable + included + credit
    amount_gpu = Decimal(billable) * gpu_price
    amount_memory = Decimal(memory_gb_seconds) * memory_price
    amount_nvme = (Decimal(nvme_gb_seconds) * nvme_price / 3600).quantize(Decimal("1e-12"))
    with transaction.atomic():
        draft = open_draft(user.pk, run_end)
        return UsageRecord.objects.create(
            cluster="test",
            slurm_job_id=next(_job_ids),
            run_start=run_end - timedelta(seconds=max(gpu_seconds, 1)),
            run_end=run_end,
            gpu_type=gpu_type,
            user=user,
            state="COMPLETED",
            seconds=gpu_seconds,
            gpu_count=1,
            gpu_seconds=gpu_seconds,
            gpu_memory_gb_seconds=memory_gb_seconds,
            gpu_memory_source=source,
            nvme_gb_seconds=nvme_gb_seconds,
            invoice=draft,
            charged_at=timezone.now(),
            plan=plan,
            gpu_price=gpu_price,
            memory_price=memory_price,
            nvme_price=nvme_price,
            included_gpu_seconds=included,
            credit_gpu_seconds=credit,
            credit_entry_id=credit_entry_id,
            billable_gpu_seconds=billable,
            amount_gpu=amount_gpu,
            amount_memory=amount_memory,
            amount_nvme=amount_nvme,
            amount=amount_gpu + amount_memory + amount_nvme,
        )
