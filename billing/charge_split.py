"""The charge split: the one place that decides what a run comes to. Pure: no Django, no
database, `Decimal` only (billing/pricing.py's rounding rule applies; its one division is
`pricing.divide`).

Every path that speaks of money asks this module, with the same run shape and the same cover:
- charging a metered run (billing/actions/charging.py), spot runs included (billing/spot.py only says
  which seconds were notice and how they fall in the day and night windows);
- the running estimate of a job in progress (billing/costs.py);
- the quote before a job, a sweep, a session or a reservation (billing/quotes.py).
So a quote for a run's seconds is its charge, and the estimate of a finished run is its charge,
given the same cover (plan hours left, credits) at the same moment.

The split, in this order:
1. A free plan (its included hours are a cap: Slurm stops the run at the cap): the whole run is
   included; nothing is billed, ever.
2. A spot run: no included hours, no credits (spot is already cheaper); each billed second pays
   its window's share of the GPU price (`Rates.spot_multiplier`), GPU memory likewise, NVMe by the
   billed seconds. A preempted run's notice (`unbilled_seconds`, at its end) is not billed.
3. Any other run: its GPU-seconds to cover (whole GPUs x seconds; a shard run's GPU-second
   equivalent, shards / shards per GPU x seconds, rounded down) are taken by the plan's included
   hours of its GPU type left, then by credits (never for a shard run: credits are whole
   GPU-seconds), and the rest is billable. GPU = billable x GPU price (a shard run has no GPU
   line: it pays for its memory); GPU memory and the NVMe beyond the plan's included NVMe are
   billed for the billable share (one division, 12 places half-up); a run with nothing to cover
   (an NVMe-only run, a very short shard run) pays its memory and NVMe whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal

from billing.pricing import SECONDS_PER_HOUR, Rates, divide

ZERO = Decimal(0)


@dataclass(frozen=True)
class RunShape:
    """What a run held and for how long: the same whether it is metered, running or quoted."""

    gpu_type: str
    seconds: int
    gpu_count: int = 0  # whole GPUs; 0 for a shard run
    shards: int = 0
    shards_per_gpu: int = 0
    # All its GPUs together: telemetry's curve for whole GPUs, shards x GB per shard x seconds
    # for a shard run, 0 when not known.
    gpu_memory_gb_seconds: Decimal | int = 0
    nvme_gb: int = 0
    # A spot run: its billed seconds per window ({"day": s, "night": s}); None for any other run.
    spot_seconds: Mapping[str, int] | None = None
    unbilled_seconds: int = 0  # a preempted spot run's notice, at its end
    # GPU-seconds held when not every GPU was held for every second (a reservation's unused
    # part: its GPUs x its window less what its jobs used); None: gpu_count x seconds.
    held_gpu_seconds: int | None = None

    def __post_init__(self):
        for name in ("seconds", "gpu_count", "shards", "shards_per_gpu", "nvme_gb", "unbilled_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"{name} must be a whole number, 0 or more")
        if isinstance(self.gpu_memory_gb_seconds, float) or self.gpu_memory_gb_seconds < 0:
            raise ValueError("gpu_memory_gb_seconds must be an int or a Decimal, 0 or more")
        if self.held_gpu_seconds is not None and not 0 <= self.held_gpu_seconds <= self.gpu_count * self.seconds:
            raise ValueError("held_gpu_seconds is at most gpu_count x seconds")
        if self.unbilled_seconds > self.seconds:
            raise ValueError("unbilled_seconds is at most the run's seconds")
        if self.spot_seconds is not None and sum(self.spot_seconds.values()) != self.billed_seconds:
            raise ValueError("the spot windows' seconds add up to the billed seconds")

    @property
    def is_spot(self) -> bool:
        return self.spot_seconds is not None

    @property
    def is_shard_run(self) -> bool:
        return self.gpu_count == 0 and self.shards > 0

    @property
    def gpu_seconds(self) -> int:
        return self.gpu_count * self.seconds if self.held_gpu_seconds is None else self.held_gpu_seconds

    @property
    def billed_seconds(self) -> int:
        return self.seconds - self.unbilled_seconds

    @property
    def to_cover(self) -> int:
        """GPU-seconds that included hours and credits may cover."""
        if self.is_shard_run:
            return self.shards * self.seconds // self.shards_per_gpu if self.shards_per_gpu > 0 else 0
        return self.gpu_seconds


@dataclass(frozen=True)
class Terms:
    """What the paying plan gives a run, and what is left of it at the run's moment."""

    capped: bool = False  # a free plan: included hours are a cap, nothing is billed
    included_nvme_gb: int = 0  # a cache size the plan includes, not a monthly pool
    included_left: int = 0  # GPU-seconds of the plan's hours of this GPU type left
    credits: int = 0  # GPU-seconds of this GPU type the payer's credits would pay for


NOTHING_COVERED = Terms()


@dataclass(frozen=True)
class Split:
    to_cover: int
    included: int
    credited: int
    billable: int  # GPU-seconds billed (0 for a shard run, which pays for memory)
    unbilled_grace: int  # GPU-seconds of a preempted spot run's notice
    unit_price: Decimal  # the GPU line's price: the memory price for a shard run
    amount_gpu: Decimal
    amount_memory: Decimal
    amount_nvme: Decimal
    spot_shares: tuple[tuple[str, Decimal, int], ...] = field(default=())  # (window, share, seconds)

    @property
    def amount(self) -> Decimal:
        return self.amount_gpu + self.amount_memory + self.amount_nvme


def credits_wanted(run: RunShape, terms: Terms) -> int:
    """GPU-seconds a charge would ask of the credits (before spending them: the spend may take
    less, and the split is then made with what it took)."""
    if terms.capped or run.is_spot or run.is_shard_run:
        return 0
    return max(0, run.to_cover - min(terms.included_left, run.to_cover))


def _share(amount: Decimal, part: int, whole: int) -> Decimal:
    """amount x part / whole: exact when part == whole, else one division to 12 places."""
    return amount if part == whole else divide(amount * part, whole)


def split(run: RunShape, rates: Rates, terms: Terms = NOTHING_COVERED) -> Split:
    """The run's charge under `terms` at `rates` (see the module). Raises PricingError when the
    card has no price for the run's GPU type."""
    gpu_price = rates.gpu_price(run.gpu_type) if run.gpu_count else ZERO
    unit_price = rates.gpu_memory_gb_second if run.is_shard_run else gpu_price
    memory = Decimal(run.gpu_memory_gb_seconds) * rates.gpu_memory_gb_second
    nvme_beyond = max(0, run.nvme_gb - terms.included_nvme_gb)
    to_cover = run.to_cover
    if terms.capped:
        return Split(to_cover, to_cover, 0, 0, 0, unit_price, ZERO, ZERO, ZERO)
    if run.is_spot:
        shares = tuple(
            (window, rates.spot_multiplier(run.gpu_type, window), seconds)
            for window, seconds in run.spot_seconds.items()
        )
        weighted = sum((share * seconds for _window, share, seconds in shares), ZERO)
        return Split(
            to_cover=to_cover,
            included=0,
            credited=0,
            billable=run.gpu_count * run.billed_seconds,
            unbilled_grace=run.gpu_count * run.unbilled_seconds,
            unit_price=unit_price,
            amount_gpu=run.gpu_count * weighted * gpu_price,
            amount_memory=divide(memory * weighted, run.seconds) if run.seconds else ZERO,
            amount_nvme=divide(Decimal(nvme_beyond * run.billed_seconds) * rates.nvme_gb_hour, SECONDS_PER_HOUR),
            spot_shares=shares,
        )
    included = min(max(0, terms.included_left), to_cover)
    credited = 0 if run.is_shard_run else min(max(0, terms.credits), to_cover - included)
    billable = to_cover - included - credited
    nvme = Decimal(nvme_beyond * run.seconds) * rates.nvme_gb_hour
    if to_cover:
        amount_memory = _share(memory, billable, to_cover)
        amount_nvme = divide(nvme * billable, SECONDS_PER_HOUR * to_cover)
    else:
        amount_memory, amount_nvme = memory, divide(nvme, SECONDS_PER_HOUR)
    return Split(
        to_cover=to_cover,
        included=included,
        credited=credited,
        billable=0 if run.is_shard_run else billable,
        unbilled_grace=0,
        unit_price=unit_price,
        amount_gpu=ZERO if run.is_shard_run else billable * gpu_price,
        amount_memory=amount_memory,
        amount_nvme=amount_nvme,
    )


def dearest(run: RunShape, offers: Sequence[tuple[Rates, Terms]]) -> int:
    """Which of `offers` (the rates and terms of each plan a run may be priced by) prices the run
    highest before credits: its index, the first on a tie. A run queued under one plan and
    started under another is never priced below either (billing/actions/charging.py). PricingError when
    a card cannot price the run."""
    amounts = [split(run, rates, replace(terms, credits=0)).amount for rates, terms in offers]
    return amounts.index(max(amounts))


def spot_note(result: Split, grace_seconds: int) -> str:
    """The words a spot charge records: each window's share and seconds, and the notice."""
    shares = ", ".join(f"{window} x{share} for {seconds} s" for window, share, seconds in result.spot_shares if seconds)
    note = f"spot: {shares or 'no billed time'}"
    return note + (f"; last {grace_seconds} s (notice before preemption) not billed" if grace_seconds else "")
