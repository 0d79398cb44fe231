"""The quote before a job, a sweep, a session or a reservation: the charge split
(billing/charge_split.py) of the run the caller asks for, under the plan that would pay it, with
the cover the payer has now. One quote for every path: the quote API, the job, sweep, session
and reservation forms and the credit limit's check all read this.

Who pays: the group the job is charged to when that group holds a plan (its plan, its included
hours left on its invoice, its credit pool), else the caller (their plan, hours, credits).
The price (`gross`): the run at the paying plan's rate card in force now, nothing covered; a spot
run at each window's share from `start` (now). What the payer would pay (`payable`): the same
split with the payer's plan hours left and credits now, i.e. what charging would bill if the run
ended with these seconds at this moment.

A shard job (gpu_count 0) is quoted as Slurm holds it: its GB rounded up to whole shards of
its GPU type, each shard's GB for every second.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from decimal import Decimal

from django.conf import settings
from django.utils import timezone

from billing.charge_split import RunShape, Split, Terms, credits_wanted, split
from billing.costs import covered_by_credits, included_seconds_used, payer_credits
from billing.invoices.drafts import month_of
from billing.pricing import SECONDS_PER_HOUR, Line, Rates, divide
from billing.spot import spot_seconds
from foundation.gpu_types import gpu_types_from_mapping
from groups.group_plans import plan_at
from plans.catalog import PlanSnapshot, plan_for
from plans.rates import rates_for_plan


@dataclass(frozen=True)
class JobQuote:
    plan: PlanSnapshot
    rates: Rates
    run: RunShape
    runs: int
    gross: Split  # nothing covered: the price
    lines: tuple[Line, ...]
    group_id: int | None  # the paying group, or None: the caller pays
    plan_gpu_seconds_left: int | None  # None: no cover asked (another plan's quote)
    credit_gpu_seconds: int | None
    covered: Split | None

    @property
    def total(self) -> Decimal:
        return self.gross.amount

    @property
    def total_rounded(self) -> Decimal:
        return sum((line.amount_rounded for line in self.lines), Decimal(0))

    @property
    def payable(self) -> Decimal | None:
        return None if self.covered is None else self.covered.amount


def shards_for(gpu_type: str, gpu_memory_gb: int) -> tuple[int, int, int]:
    """(shards, shards per GPU, GB per shard) of a GPU-memory request of `gpu_memory_gb`, as the
    submission maps it (foundation.gpu_types.GpuType.shards_for)."""
    info = gpu_types_from_mapping(settings.GPU_TYPES).get(gpu_type)
    if info is None or info.shards_per_gpu <= 0:
        return 0, 0, 0
    return info.shards_for(gpu_memory_gb), info.shards_per_gpu, info.shard_gb


def run_to_quote(
    *, gpu_type: str, gpu_count: int, gpu_memory_gb: int, nvme_gb: int, seconds: int, spot: bool, start: datetime
) -> RunShape:
    """The run a quote prices: whole GPUs with `gpu_memory_gb` of memory (all of them
    together) for `seconds`, or a shard run of that many GB rounded up to whole shards."""
    shards = per_gpu = 0
    memory_gb_seconds = gpu_memory_gb * seconds
    if not gpu_count and gpu_memory_gb:
        shards, per_gpu, shard_gb = shards_for(gpu_type, gpu_memory_gb)
        memory_gb_seconds = shards * shard_gb * seconds if shard_gb else memory_gb_seconds
    return RunShape(
        gpu_type=gpu_type,
        seconds=seconds,
        gpu_count=gpu_count,
        shards=shards,
        shards_per_gpu=per_gpu,
        gpu_memory_gb_seconds=memory_gb_seconds,
        nvme_gb=nvme_gb,
        spot_seconds=spot_seconds(start, seconds) if spot else None,
    )


def _lines(run: RunShape, rates: Rates, gross: Split) -> tuple[Line, ...]:
    gpu_price = rates.gpu_price(run.gpu_type)
    gpu_description = f"{run.gpu_type} GPU-seconds"
    if gross.spot_shares:
        shares = ", ".join(f"{window} x{share}" for window, share, seconds in gross.spot_shares if seconds)
        gpu_description += f" (spot: {shares})"
    memory_gb_seconds = Decimal(run.gpu_memory_gb_seconds)
    return (
        Line("gpu", gpu_description, Decimal(run.gpu_seconds), "GPU-s", gpu_price, gross.amount_gpu),
        Line(
            "gpu_memory",
            "GPU memory GB-seconds",
            memory_gb_seconds,
            "GB-s",
            rates.gpu_memory_gb_second,
            gross.amount_memory,
        ),
        Line(
            "nvme",
            "NVMe cache GB-hours",
            divide(Decimal(run.nvme_gb * run.seconds), SECONDS_PER_HOUR),
            "GB-h",
            rates.nvme_gb_hour,
            gross.amount_nvme,
        ),
    )


def paying_plan(user, group=None, moment=None) -> tuple[PlanSnapshot, int | None]:
    """(plan, paying group id or None): the group's plan when it holds one, else the user's."""
    if group is not None:
        held = plan_at(group.pk, moment or timezone.now())
        if held is not None:
            return held, group.pk
    return plan_for(user), None


def quote_job(
    user,
    *,
    gpu_type: str,
    gpu_count: int,
    gpu_memory_gb: int = 0,
    nvme_gb: int = 0,
    seconds: int,
    spot: bool = False,
    group=None,
    plan: PlanSnapshot | None = None,
    runs: int = 1,
    now: datetime | None = None,
) -> JobQuote:
    """The quote (see the module). `plan`: price under this plan instead (no cover is asked:
    it is not what the caller would pay). `runs`: that many runs of `seconds` each (a sweep's
    tasks), priced as one run of their seconds together. Raises NoRateCard or PricingError."""
    now = now or timezone.now()
    paying, group_id = paying_plan(user, group, now)
    asked_for_another = plan is not None and plan.code != paying.code
    plan = plan or paying
    rates = rates_for_plan(plan, now)
    one = run_to_quote(
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        gpu_memory_gb=gpu_memory_gb,
        nvme_gb=nvme_gb,
        seconds=seconds,
        spot=spot,
        start=now,
    )
    run = one
    if runs > 1:
        windows = {window: count * runs for window, count in one.spot_seconds.items()} if one.is_spot else None
        run = replace(
            one, seconds=seconds * runs, gpu_memory_gb_seconds=one.gpu_memory_gb_seconds * runs, spot_seconds=windows
        )
    gross = split(run, rates)
    lines = _lines(run, rates, gross)
    if asked_for_another:
        return JobQuote(plan, rates, run, runs, gross, lines, group_id, None, None, None)
    payer = ("group", group_id) if group_id else ("user", user.pk)
    hours = plan.included_gpu_hours.get(gpu_type, 0)
    used = included_seconds_used([] if group_id else [user.pk], month_of(now), [group_id] if group_id else [])
    terms = Terms(
        capped=plan.included_hours_are_a_cap,
        included_nvme_gb=plan.included_nvme_gb,
        included_left=max(0, hours * SECONDS_PER_HOUR - used.get((payer, gpu_type), 0)),
    )
    wanted = credits_wanted(run, terms)
    taken = covered_by_credits(gpu_type, wanted, payer_credits(payer, now) if wanted else 0, now)
    credit = taken.covered_gpu_seconds if taken else 0
    covered = split(run, rates, replace(terms, credits=credit))
    return JobQuote(plan, rates, run, runs, gross, lines, group_id, terms.included_left, credit, covered)


def quote_spec(user, spec, *, runs: int = 1, group=None) -> JobQuote:
    """The quote of `runs` runs of a job spec (jobs.submission.spec.JobSpec), each its whole time
    limit: its GPUs or GPU memory, its NVMe with its datasets' GB, spot or not, charged to
    `group` (its plan pays when it holds one) or to `user`. Raises NoRateCard or PricingError."""
    return quote_job(
        user,
        gpu_type=spec.gpu.gpu_type,
        gpu_count=spec.gpu.count,
        gpu_memory_gb=0 if spec.gpu.count else spec.gpu.memory_gb,
        nvme_gb=spec.gpu.nvme_gb + spec.gpu.dataset_gb,
        seconds=spec.time_limit_minutes * 60,
        spot=spec.spot,
        group=group,
        runs=runs,
    )
