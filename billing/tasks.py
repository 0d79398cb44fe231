"""Billing's Celery tasks. Each is idempotent and safe to run twice or at once."""

from __future__ import annotations

from celery import shared_task

from billing.budgets import check_budgets
from billing.metering import run_metering
from cluster.sync import single_flight


@shared_task(ignore_result=True)
def meter_usage() -> str | None:
    """One metering pass over the moving window (billing/metering.py). One pass at a time;
    a pass that finds another running does nothing (the unique constraint would make it
    harmless anyway)."""
    with single_flight("meter_usage", timeout=900) as acquired:
        if not acquired:
            return None
        result = run_metering()
        if result and result.charged:
            # Charges just landed: the budgets' 80/100 % e-mails go now, not at their own beat.
            check_budgets()
        return result.summary() if result else None
