"""A rate card as a frozen value: what `plans.rates` reads from the database and the pricing core
(billing/pricing.py) prices with. Pure: no Django, no database, `Decimal` only, so the core keeps
running without a database and the plan pages (a lower layer than billing) can show prices.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from decimal import Decimal
from types import MappingProxyType


class PricingError(ValueError):
    """Input the core cannot price; `field` names the argument at fault."""

    def __init__(self, field_name: str, message: str):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message


def number(value, name: str, *, whole: bool = False) -> Decimal:
    """`value` as a Decimal, refusing floats (0.1 + 0.2 is not money) and negative amounts."""
    # bool is an int in Python; True GPUs is a mistake, not 1.
    if isinstance(value, bool) or isinstance(value, float) or not isinstance(value, int | Decimal):
        raise TypeError(f"{name} must be an int{'' if whole else ' or a Decimal'}, not {type(value).__name__}")
    if whole and not isinstance(value, int):
        raise TypeError(f"{name} must be an int")
    result = Decimal(value)
    if not result.is_finite() or result < 0:
        raise PricingError(name, "must be a finite number, 0 or more")
    return result


@dataclass(frozen=True)
class DiscountTier:
    """A month's usage of at least `min_spend` USD takes `fraction` off the whole month."""

    min_spend: Decimal
    fraction: Decimal

    def __post_init__(self):
        number(self.min_spend, "min_spend")
        if number(self.fraction, "fraction") >= 1:
            raise PricingError("fraction", "a discount takes less than the whole")


@dataclass(frozen=True)
class Rates:
    """One rate card as in force from `effective_from`: per-use prices in USD and the volume
    discount tiers of a month it governs. Complete: a GPU type without a price here cannot be
    priced at this card (`gpu_price` says so); nothing is borrowed from another card."""

    card: str
    name: str
    effective_from: datetime | None
    gpu_second: Mapping[str, Decimal]
    gpu_memory_gb_second: Decimal
    nvme_gb_hour: Decimal
    discount_tiers: tuple[DiscountTier, ...] = field(default=())
    # {(gpu_type, "night" | "day"): share of the GPU price a spot run pays} (plans/spot.py).
    spot_multipliers: Mapping[tuple[str, str], Decimal] = field(default_factory=dict)

    def __post_init__(self):
        for name, price in [
            *self.gpu_second.items(),
            ("memory", self.gpu_memory_gb_second),
            ("nvme", self.nvme_gb_hour),
        ]:
            number(price, f"price of {name}")
        # Frozen means frozen: a dict passed in could still be changed by its owner.
        object.__setattr__(self, "gpu_second", MappingProxyType(dict(self.gpu_second)))
        object.__setattr__(self, "spot_multipliers", MappingProxyType(dict(self.spot_multipliers)))
        # Highest threshold first: the first one a month reaches is its tier.
        tiers = tuple(sorted(self.discount_tiers, key=lambda tier: tier.min_spend, reverse=True))
        object.__setattr__(self, "discount_tiers", tiers)

    def gpu_price(self, gpu_type: str) -> Decimal:
        try:
            return self.gpu_second[gpu_type]
        except KeyError:
            raise PricingError("gpu_type", f"the rate card {self.card!r} has no price for {gpu_type!r}") from None

    def spot_multiplier(self, gpu_type: str, window: str) -> Decimal:
        """The share of the price a spot run pays; 1 (the full price) where the card sets none."""
        return self.spot_multipliers.get((gpu_type, window), Decimal(1))

    def gpu_price_source(self, gpu_type: str) -> str:
        return f"rate card {self.card}"
