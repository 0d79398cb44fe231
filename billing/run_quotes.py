"""Quotes of runs not yet started, for the layers below billing (jobs.costs.quote_runs): a
sweep's tasks before it is submitted. The same prices and the same split as the quote API
(billing/api/views.py): the plan's rate card, included hours then credits, the rest billed."""

from __future__ import annotations

from decimal import Decimal

from billing.api.views import coverage, payable
from billing.pricing import PricingError, quote, to_cents
from jobs.costs import RunQuote
from plans.catalog import plan_for
from plans.rates import NoRateCard, rates_for_plan


def quote_runs(
    user, *, gpu_type: str, gpu_count: int, gpu_memory_gb: int, nvme_gb: int, seconds: int, runs: int
) -> RunQuote | None:
    """`runs` runs of `seconds` each, all at once: one run's lines times `runs` (exact: every line
    is a quantity times a price, and the NVMe division is exact to 12 places per run, then
    multiplied), each line rounded to the cent as an invoice rounds it."""
    plan = plan_for(user)
    try:
        one = quote(gpu_type, gpu_count, seconds, gpu_memory_gb, nvme_gb, rates=rates_for_plan(plan))
    except (NoRateCard, PricingError):
        return None
    total = sum((to_cents(line.amount * runs) for line in one.lines), Decimal(0))
    gpu_seconds = gpu_count * seconds * runs
    cover = coverage(user, plan, gpu_type, gpu_seconds)
    values = {"nvme_gb": nvme_gb, "seconds": seconds * runs}
    whole = quote(gpu_type, gpu_count, seconds * runs, gpu_memory_gb, nvme_gb, rates=one.rates)
    note = "" if gpu_count else "GPU memory jobs pay for their memory; plan hours and credits cover whole GPUs."
    if plan.included_hours_are_a_cap:
        note = f"The {plan.name} plan bills nothing; its tasks count against its monthly hours."
    return RunQuote(
        runs=runs,
        gpu_seconds=gpu_seconds,
        total=total,
        covered_gpu_seconds=cover["covered_gpu_seconds"],
        payable=to_cents(payable(whole, plan, cover, values)),
        note=note,
    )
