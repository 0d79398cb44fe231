"""The pure pricing core (docs/product.md, "Billing"): no Django, no database, `Decimal` only.

    charge = GPU-seconds x GPU price + GPU-memory GB-seconds x memory price
             + NVMe GB-hours x storage price

The rounding rule, the only one:

1. Quantities are exact: GPU-seconds and GB-seconds are whole numbers times whole numbers;
   GB-hours are GB-seconds / 3600 (shown to 12 places when that does not divide exactly; the
   amount is computed from the exact GB-seconds, never from the shown quantity).
2. Line amounts are kept exact, as `Decimal`: a quantity times a price with at most 8 places is
   a finite decimal. The one division (GB-seconds x price / 3600 for NVMe, and a month's fee
   x N / D days for pro rata) is carried to 12 places, half-up. That never moves a cent: with
   prices of at most 8 places the numerator is a multiple of 10^-8, so the quotient is either
   a half cent exactly or at least 10^-8 / 3600 (about 2.8 x 10^-12) away from one, more than
   the 0.5 x 10^-12 the 12th place can move it (tested against exact fractions).
3. Lines are rounded half-up to the cent only at invoice time (`to_cents`), line by line;
   the invoice total is the sum of its rounded lines.

A quote shows each line's exact amount, the exact `total` (the sum of the exact lines), and
`total_rounded`: the sum of the lines each rounded half-up to the cent, i.e. what this usage
alone would come to on an invoice. The article's example: $2.70 + $0.864 + $5.00 = $8.564
exact; $2.70 + $0.86 + $5.00 = $8.56 rounded.

Floats are refused everywhere (TypeError): 0.1 + 0.2 is not money.
"""

from __future__ import annotations

import calendar
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, localcontext
from types import MappingProxyType

CENT = Decimal("0.01")
# Where the one division (by 3600 s, or by the days of a month) stops; see rule 2 above.
DIVISION_QUANTUM = Decimal("1e-12")
SECONDS_PER_HOUR = 3600

# Volume discount for Enterprise (docs/product.md): the month's spend at or above the threshold
# takes that much off the whole month. Highest threshold first.
VOLUME_DISCOUNTS = ((Decimal("10000"), Decimal("0.10")), (Decimal("5000"), Decimal("0.05")))


class PricingError(ValueError):
    """Input the core cannot price; `field` names the argument at fault."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def _number(value, name: str, *, whole: bool = False) -> Decimal:
    # bool is an int in Python; True GPUs is a mistake, not 1.
    if isinstance(value, bool) or isinstance(value, float) or not isinstance(value, int | Decimal):
        raise TypeError(f"{name} must be an int{'' if whole else ' or a Decimal'}, not {type(value).__name__}")
    if whole and not isinstance(value, int):
        raise TypeError(f"{name} must be an int")
    number = Decimal(value)
    if not number.is_finite() or number < 0:
        raise PricingError(name, "must be a finite number, 0 or more")
    return number


def to_cents(amount: Decimal) -> Decimal:
    """The invoice rounding: half-up to the cent (0.005 -> 0.01, -0.005 -> -0.01)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def _divide(numerator: Decimal, denominator: int) -> Decimal:
    """numerator / denominator to 12 places, half-up (rule 2): unchanged when the quotient
    has no more places than that."""
    # Enough digits that the quotient is not rounded once before the quantize rounds it.
    with localcontext() as context:
        context.prec = 60
        return (numerator / Decimal(denominator)).quantize(DIVISION_QUANTUM, rounding=ROUND_HALF_UP)


def divide(numerator: Decimal, denominator: int) -> Decimal:
    """Rule 2's one division, for the share of a line that charging takes (billing/charging.py:
    a run partly covered by included hours or credits pays that share of its memory and NVMe)."""
    return _divide(numerator, denominator)


def format_amount(amount: Decimal) -> str:
    """A money amount as a decimal string: exact, trailing zeros dropped but at least two
    places ("2.70", "0.864", "5.00", "8.564")."""
    text = format(amount.normalize(), "f")
    whole, _, places = text.partition(".")
    return f"{whole}.{places.ljust(2, '0')}"


def format_quantity(quantity: Decimal) -> str:
    """A quantity as a decimal string without exponent or trailing zeros ("1800", "250")."""
    return format(quantity.normalize(), "f") if quantity else "0"


@dataclass(frozen=True)
class Rates:
    """A frozen price list: what `billing.rates.rate_card_at` returns, and what a plan's own
    per-second prices are laid over (`with_plan_prices`). Prices in USD."""

    card: str
    name: str
    effective_from: datetime | None
    gpu_second: Mapping[str, Decimal]
    gpu_memory_gb_second: Decimal
    nvme_gb_hour: Decimal
    # The plan whose per-second GPU prices replace the card's for `plan_gpu_types`.
    plan: str = ""
    plan_gpu_types: frozenset[str] = field(default_factory=frozenset)

    def __post_init__(self):
        for name, price in [
            *self.gpu_second.items(),
            ("memory", self.gpu_memory_gb_second),
            ("nvme", self.nvme_gb_hour),
        ]:
            _number(price, f"price of {name}")
        # Frozen means frozen: a dict passed in could still be changed by its owner.
        object.__setattr__(self, "gpu_second", MappingProxyType(dict(self.gpu_second)))

    def with_plan_prices(self, plan: str, prices: Mapping[str, Decimal]) -> Rates:
        """These rates with a plan's per-second GPU prices (Enterprise) in place of the card's."""
        if not prices:
            return self
        return Rates(
            card=self.card,
            name=self.name,
            effective_from=self.effective_from,
            gpu_second={**self.gpu_second, **prices},
            gpu_memory_gb_second=self.gpu_memory_gb_second,
            nvme_gb_hour=self.nvme_gb_hour,
            plan=plan,
            plan_gpu_types=frozenset(prices),
        )

    def gpu_price(self, gpu_type: str) -> Decimal:
        try:
            return self.gpu_second[gpu_type]
        except KeyError:
            raise PricingError("gpu_type", f"the rate card {self.card!r} has no price for {gpu_type!r}") from None

    def gpu_price_source(self, gpu_type: str) -> str:
        if gpu_type in self.plan_gpu_types:
            return f"plan {self.plan}"
        return f"rate card {self.card}"


@dataclass(frozen=True)
class Line:
    kind: str  # "gpu", "gpu_memory", "nvme"
    description: str
    quantity: Decimal
    unit: str  # "GPU-s", "GB-s", "GB-h"
    unit_price: Decimal
    amount: Decimal  # exact (rule 2)

    @property
    def amount_rounded(self) -> Decimal:
        return to_cents(self.amount)


@dataclass(frozen=True)
class Quote:
    gpu_type: str
    lines: tuple[Line, ...]
    rates: Rates

    @property
    def total(self) -> Decimal:
        """Exact: the sum of the exact lines."""
        return sum((line.amount for line in self.lines), Decimal(0))

    @property
    def total_rounded(self) -> Decimal:
        """The sum of the lines each rounded half-up to the cent (the invoice rule)."""
        return sum((line.amount_rounded for line in self.lines), Decimal(0))


def quote(
    gpu_type: str,
    gpu_count: int,
    seconds: int | Decimal,
    gpu_memory_gb: int | Decimal = 0,
    nvme_gb: int | Decimal = 0,
    *,
    rates: Rates,
) -> Quote:
    """What `gpu_count` GPUs of `gpu_type` for `seconds` cost at `rates`.

    `gpu_memory_gb` is the job's GPU memory, all its GPUs together (the average used, from
    telemetry, for whole GPUs; shards x GB per shard for a shard job, which has gpu_count 0);
    `nvme_gb` the NVMe cache held for the same `seconds`. Three lines, always, in that order."""
    count = _number(gpu_count, "gpu_count", whole=True)
    duration = _number(seconds, "seconds")
    memory = _number(gpu_memory_gb, "gpu_memory_gb")
    nvme = _number(nvme_gb, "nvme_gb")
    gpu_price = rates.gpu_price(gpu_type)

    gpu_seconds = count * duration
    gb_seconds = memory * duration
    nvme_gb_seconds = nvme * duration
    nvme_gb_hours = _divide(nvme_gb_seconds, SECONDS_PER_HOUR)
    lines = (
        Line("gpu", f"{gpu_type} GPU-seconds", gpu_seconds, "GPU-s", gpu_price, gpu_seconds * gpu_price),
        Line(
            "gpu_memory",
            "GPU memory GB-seconds",
            gb_seconds,
            "GB-s",
            rates.gpu_memory_gb_second,
            gb_seconds * rates.gpu_memory_gb_second,
        ),
        Line(
            "nvme",
            "NVMe cache GB-hours",
            nvme_gb_hours,
            "GB-h",
            rates.nvme_gb_hour,
            # From the exact GB-seconds: the quantity above may be the shown, rounded one.
            _divide(nvme_gb_seconds * rates.nvme_gb_hour, SECONDS_PER_HOUR),
        ),
    )
    return Quote(gpu_type=gpu_type, lines=lines, rates=rates)


@dataclass(frozen=True)
class Discount:
    rate: Decimal  # 0, 0.05 or 0.10
    amount: Decimal  # exact; the invoice shows it as a negative line, rounded like any line


def volume_discount(month_spend: Decimal) -> Discount:
    """Enterprise: a month's spend >= $5,000 takes 5 % off the whole month, >= $10,000 10 %.
    `month_spend` is the month's usage as invoiced (the sum of its rounded lines)."""
    spend = _number(month_spend, "month_spend")
    for threshold, rate in VOLUME_DISCOUNTS:
        if spend >= threshold:
            return Discount(rate=rate, amount=spend * rate)
    return Discount(rate=Decimal(0), amount=Decimal(0))


def days_in_month(year: int, month: int) -> int:
    return calendar.monthrange(year, month)[1]


def pro_rata(monthly_fee: Decimal, days: int, month_days: int) -> Decimal:
    """A month's fee for `days` of a `month_days`-day month (a paused subscription, a plan
    changed mid-month): exact when it divides, else 12 places (rule 2)."""
    fee = _number(monthly_fee, "monthly_fee")
    used = _number(days, "days", whole=True)
    total_days = _number(month_days, "month_days", whole=True)
    if not 28 <= total_days <= 31:
        raise PricingError("month_days", "a month has 28 to 31 days")
    if used > total_days:
        raise PricingError("days", f"at most {month_days} in this month")
    return _divide(fee * used, month_days)
