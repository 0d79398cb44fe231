"""Billing's Celery tasks. Each is idempotent and safe to run twice or at once."""

from __future__ import annotations

from celery import shared_task

from billing import digests, group_money
from billing.actions import budgets, closing, credit_limits, reserved_time
from billing.usage.metering import run_metering
from cluster.clusters.sync import single_flight


@shared_task(ignore_result=True)
def meter_usage() -> str | None:
    """One metering pass over the moving window (billing/usage/metering.py). One pass at a time;
    a pass that finds another running does nothing (the unique constraint would make it
    harmless anyway)."""
    with single_flight("meter_usage", timeout=900) as acquired:
        if not acquired:
            return None
        result = run_metering()
        if result and result.charged:
            # Charges just landed: the budgets' 80/100 % e-mails go now, not at their own beat.
            budgets.check_budgets()
            group_money.check_group_budgets()
        return result.summary() if result else None


@shared_task(ignore_result=True)
def check_budgets() -> int:
    """Beat: e-mail the budgets that crossed 80 % or 100 % this month (billing/actions/budgets.py,
    billing/group_money.py for groups')."""
    return budgets.check_budgets() + group_money.check_group_budgets()


@shared_task
def close_month(period: str | None = None) -> str:
    """Beat, hourly: close the latest month that may close, or `period` ("YYYY-MM")
    (billing/actions/closing.py)."""
    return closing.close_month(period)


@shared_task
def refresh_drafts() -> int:
    """Beat: rebuild the drafts whose lines are stale (billing/actions/closing.py)."""
    return closing.refresh_drafts()


@shared_task(ignore_result=True)
def meter_reservations() -> int:
    """Beat: meter every ended reservation's unused time (billing/actions/reserved_time.py)."""
    return reserved_time.meter_reservations()


@shared_task(ignore_result=True)
def hold_work_at_credit_limits() -> dict:
    """billing/actions/credit_limits.py: waiting work held at a pay-afterwards account's limit, released below it."""
    return credit_limits.hold_work_at_limits()


@shared_task(ignore_result=True)
def send_weekly_digests() -> int:
    return digests.send_weekly_digests()
