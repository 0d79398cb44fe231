"""Usage records as metering and charging leave them, written directly: tests of what users
see of their money do not wait for (or depend on) the metering and charging code."""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from billing.invoices.drafts import open_draft
from billing.models import UsageRecord

_slurm_ids = itertools.count(900_000)


def record(
    user,
    run_end: datetime,
    *,
    job=None,
    seconds=3600,
    gpu_type="a100",
    gpu_count=1,
    included=0,
    credit=0,
    amount_gpu=None,
    amount_memory=Decimal(0),
    amount_nvme=Decimal(0),
    plan="pro",
    charged=True,
    slurm_job_id=None,
) -> UsageRecord:
    """One run of `seconds` ending at `run_end`; GPU-seconds beyond `included` and `credit` are
    billable at $0.0015 (the list A100 price) unless `amount_gpu` says otherwise. Charged to the
    user's open draft when `charged`."""
    gpu_seconds = seconds * gpu_count
    billable = gpu_seconds - included - credit
    if amount_gpu is None:
        amount_gpu = billable * Decimal("0.0015")
    fields = {
        "cluster": "test",
        "slurm_job_id": slurm_job_id or (job.slurm_job_id if job and job.slurm_job_id else next(_slurm_ids)),
        "run_start": run_end - timedelta(seconds=seconds),
        "run_end": run_end,
        "gpu_type": gpu_type,
        "user": user,
        "job": job,
        "state": "COMPLETED",
        "seconds": seconds,
        "gpu_count": gpu_count,
        "gpu_seconds": gpu_seconds,
    }
    if not charged:
        return UsageRecord.objects.create(**fields)
    with transaction.atomic():
        draft = open_draft(user.pk, run_end)
        return UsageRecord.objects.create(
            **fields,
            invoice=draft,
            charged_at=timezone.now(),
            plan=plan,
            gpu_price=Decimal("0.0015"),
            memory_price=Decimal("0.00002"),
            nvme_price=Decimal("0.02"),
            included_gpu_seconds=included,
            credit_gpu_seconds=credit,
            billable_gpu_seconds=billable,
            amount_gpu=amount_gpu,
            amount_memory=amount_memory,
            amount_nvme=amount_nvme,
            amount=amount_gpu + amount_memory + amount_nvme,
        )
