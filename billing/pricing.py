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

Prices come in as a frozen rate card (`Rates`, read by plans/rates.py) and the volume discount
tiers as an argument (`volume_discount`; the tiers are rows of a rate card): the core holds no
price of its own (docs/billing.md says which card applies when).

Floats are refused everywhere (TypeError): 0.1 + 0.2 is not money.
"""

from __future__ import annotations

import calendar
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, localcontext

# The rate card as a value lives with the catalogue (plans/price_list.py: the plan pages, a lower
# layer, show its prices); the core prices with it and names it from here too.
# Rule 3's rounding and the API's written form of an amount, kept with the pages' in foundation.
from foundation.money import CENT, format_amount, to_cents
from plans.price_list import DiscountTier, PricingError, Rates
from plans.price_list import number as _number

__all__ = [
    "CENT",
    "DIVISION_QUANTUM",
    "SECONDS_PER_HOUR",
    "Discount",
    "DiscountTier",
    "Line",
    "PricingError",
    "Quote",
    "Rates",
    "days_in_month",
    "divide",
    "format_amount",
    "format_quantity",
    "pro_rata",
    "quote",
    "to_cents",
    "volume_discount",
]

# Where the one division (by 3600 s, or by the days of a month) stops; see rule 2 above.
DIVISION_QUANTUM = Decimal("1e-12")
SECONDS_PER_HOUR = 3600


def _divide(numerator: Decimal, denominator: int) -> Decimal:
    """numerator / denominator to 12 places, half-up (rule 2): unchanged when the quotient
    has no more places than that."""
    # Enough digits that the quotient is not rounded once before the quantize rounds it.
    with localcontext() as context:
        context.prec = 60
        return (numerator / Decimal(denominator)).quantize(DIVISION_QUANTUM, rounding=ROUND_HALF_UP)


def divide(numerator: Decimal, denominator: int) -> Decimal:
    """Rule 2's one division, for the share of a line that charging takes (billing/actions/charging.py:
    a run partly covered by included hours or credits pays that share of its memory and NVMe)."""
    return _divide(numerator, denominator)


def format_quantity(quantity: Decimal) -> str:
    """A quantity as a decimal string without exponent or trailing zeros ("1800", "250")."""
    return format(quantity.normalize(), "f") if quantity else "0"


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
    rate: Decimal  # the tier's fraction (0.05, 0.10), 0 below every tier
    amount: Decimal  # exact; the invoice shows it as a negative line, rounded like any line


def volume_discount(month_spend: Decimal, tiers: Sequence[DiscountTier]) -> Discount:
    """The volume discount of a month's spend under `tiers` (the rate card that governs the
    month: `Rates.discount_tiers`): the highest tier whose `min_spend` the spend reaches takes its
    fraction off the whole month; none reached, or no tiers, nothing. `month_spend` is the
    month's usage as invoiced (the sum of its rounded lines)."""
    spend = _number(month_spend, "month_spend")
    for tier in sorted(tiers, key=lambda tier: tier.min_spend, reverse=True):
        if spend >= tier.min_spend:
            return Discount(rate=tier.fraction, amount=spend * tier.fraction)
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
