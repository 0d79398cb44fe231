"""What a job costs, told to the job page and the job API by a higher layer.

Money lives in billing/, above jobs/, and jobs/ must not import it. So jobs/ keeps this
registry: billing fills it in its AppConfig.ready() (`register_cost_provider`), and the job
serializer and the job page ask it (`costs_for`, `cost_for`). Without a provider (billing not
installed) every job's cost is None and the pages say nothing about money.

A provider takes jobs, all at once, so a page of jobs costs a fixed number of queries, and
returns a `JobCost` for each job it has something to say about.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import TYPE_CHECKING

from foundation.money import format_amount

if TYPE_CHECKING:
    from jobs.models import Job
    from jobs.submission.spec import JobSpec


def money(amount: Decimal | None) -> str | None:
    """The API's form of an amount (foundation.money.format_amount), or None."""
    return None if amount is None else format_amount(amount)


def _hours(seconds: int) -> Decimal:
    return (Decimal(seconds) / 3600).quantize(Decimal("0.01"))


@dataclass(frozen=True)
class CostDetail:
    """How a job's money comes about. Seconds are GPU-seconds; amounts are exact `Decimal`."""

    basis: str  # "metered": from usage records; "estimate": from the elapsed time so far
    runs: int  # usage records (a requeued job has one per run); 0 for a pure estimate
    plan: str
    gpu_seconds: int
    included_gpu_seconds: int  # covered by the plan's included hours
    credit_gpu_seconds: int  # covered by credits
    billable_gpu_seconds: int
    amount_gpu: Decimal
    amount_memory: Decimal
    amount_nvme: Decimal
    note: str = ""
    # Runs Slurm ended PREEMPTED (a spot job that gave its GPUs to a plan's job and was
    # requeued), and their GPU-seconds: work lost unless the job checkpointed on the notice.
    preempted_runs: int = 0
    preempted_gpu_seconds: int = 0
    plan_name: str = ""  # the plan as people call it ("Pro"); `plan` is its code

    # For the page: hours to two places, amounts as money().
    @property
    def included_gpu_hours(self) -> Decimal:
        return _hours(self.included_gpu_seconds)

    @property
    def credit_gpu_hours(self) -> Decimal:
        return _hours(self.credit_gpu_seconds)

    @property
    def billable_gpu_hours(self) -> Decimal:
        return _hours(self.billable_gpu_seconds)

    @property
    def amounts_text(self) -> dict[str, str | None]:
        return {"gpu": money(self.amount_gpu), "memory": money(self.amount_memory), "nvme": money(self.amount_nvme)}


@dataclass(frozen=True)
class JobCost:
    # Once the job has ended and every run of it is charged: the sum of its runs' amounts.
    cost: Decimal | None
    # While it runs: runs charged so far plus an estimate of the run in progress.
    cost_so_far: Decimal | None
    detail: CostDetail | None = None
    is_estimate: bool = False
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def cost_text(self) -> str | None:
        return money(self.cost)

    @property
    def cost_so_far_text(self) -> str | None:
        return money(self.cost_so_far)


CostProvider = Callable[[Sequence["Job"]], Mapping[int, JobCost]]

_provider: CostProvider | None = None


def register_cost_provider(provider: CostProvider) -> None:
    """Called once, from the billing app's ready(); a second call replaces the first (tests)."""
    global _provider
    _provider = provider


def costs_for(jobs: Sequence[Job]) -> Mapping[int, JobCost]:
    """{job id: JobCost} for those of `jobs` there is something to say about."""
    if _provider is None or not jobs:
        return {}
    return _provider(list(jobs))


def cost_for(job: Job) -> JobCost | None:
    return costs_for([job]).get(job.pk)


@dataclass(frozen=True)
class RunQuote:
    """What runs not yet started would cost at most: `runs` runs, each its whole time limit
    (a sweep's tasks), at the caller's plan's prices now; exact Decimal amounts."""

    runs: int
    gpu_seconds: int
    total: Decimal  # every run billed in full (the sum of the lines each rounded to the cent)
    covered_gpu_seconds: int  # what the plan's hours left and the caller's credits cover now
    payable: Decimal  # what the caller would pay of `total`, to the cent
    note: str = ""

    @property
    def total_text(self) -> str | None:
        return money(self.total)

    @property
    def payable_text(self) -> str | None:
        return money(self.payable)


QuoteProvider = Callable[..., RunQuote | None]
_quote_provider: QuoteProvider | None = None


def register_quote_provider(provider: QuoteProvider) -> None:
    """Called once, from the billing app's ready()."""
    global _quote_provider
    _quote_provider = provider


def quote_runs(user, spec: JobSpec, *, runs: int, group=None) -> RunQuote | None:
    """What `runs` runs of `spec` would cost at most, each its whole time limit, charged to
    `group` (its plan pays when it holds one) or to `user`. None without a provider, or when there
    are no prices to quote with."""
    if _quote_provider is None or runs <= 0:
        return None
    return _quote_provider(user, spec, runs=runs, group=group)
