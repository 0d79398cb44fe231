"""Quotes of runs not yet started, for the layers below billing (jobs.costs.quote_runs): a
sweep's tasks before it is submitted. The one quote (billing/quotes.py): the plan that would pay,
its rate card now, the payer's plan hours and credits, split as charging splits a run."""

from __future__ import annotations

from decimal import Decimal

from billing.pricing import PricingError, to_cents
from billing.quotes import quote_spec
from jobs.costs import RunQuote
from plans.rates import NoRateCard


def quote_runs(user, spec, *, runs: int, group=None) -> RunQuote | None:
    """`runs` runs of `spec`, each its whole time limit, all at once, priced as one run of their
    seconds together (every line is a quantity times a price, so that is the runs' sum)."""
    try:
        result = quote_spec(user, spec, runs=runs, group=group)
    except (NoRateCard, PricingError):
        return None
    covered = result.covered
    note = ""
    if result.plan.included_hours_are_a_cap:
        note = f"The {result.plan.name} plan bills nothing; its tasks count against its monthly hours."
    elif result.run.is_spot:
        note = "Spot tasks pay each time window's share of the price; plan hours and credits do not cover them."
    elif result.run.is_shard_run:
        note = "GPU memory tasks take plan hours as GPU-second equivalents; credits cover whole GPUs only."
    return RunQuote(
        runs=runs,
        gpu_seconds=covered.to_cover,
        total=sum((to_cents(line.amount) for line in result.lines), Decimal(0)),
        covered_gpu_seconds=covered.included + covered.credited,
        payable=to_cents(covered.amount),
        note=note,
    )
