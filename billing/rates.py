"""Reading rate cards: the card in force at a moment, as a frozen `pricing.Rates`, and the
rates a plan pays. The only module that turns rate card rows into prices."""

from __future__ import annotations

from datetime import datetime

from django.utils import timezone

from billing.models import RateCard
from billing.pricing import Rates
from plans.catalog import PlanSnapshot

LIST_CARD = "list"


class NoRateCard(LookupError):
    def __init__(self, code: str, moment: datetime):
        super().__init__(f"no rate card {code!r} is in force at {moment.isoformat()}")
        self.code = code
        self.moment = moment


def snapshot(card: RateCard) -> Rates:
    return Rates(
        card=card.code,
        name=card.name,
        effective_from=card.effective_from,
        gpu_second={row.gpu_type: row.price_per_gpu_second for row in card.gpu_prices.all()},
        gpu_memory_gb_second=card.gpu_memory_price_per_gb_second,
        nvme_gb_hour=card.nvme_price_per_gb_hour,
    )


def rate_card_at(code: str, moment: datetime | None = None) -> Rates:
    """The card `code` in force at `moment` (default now): the newest whose effective_from
    is not after it."""
    moment = moment or timezone.now()
    if timezone.is_naive(moment):
        # A naive time means a different instant in each time zone: not for prices.
        raise ValueError("moment must be timezone-aware")
    card = (
        RateCard.objects.filter(code=code, effective_from__lte=moment)
        .order_by("-effective_from")
        .prefetch_related("gpu_prices")
        .first()
    )
    if card is None:
        raise NoRateCard(code, moment)
    return snapshot(card)


def rates_for_plan(plan: PlanSnapshot, moment: datetime | None = None) -> Rates:
    """What a plan pays: the list card, with the plan's own per-second GPU prices in place
    of the card's where it has them (Enterprise: A100 and H100; every other type, memory and
    NVMe at the list card)."""
    return rate_card_at(LIST_CARD, moment).with_plan_prices(plan.code, plan.rates_per_second)


def card_state(card: RateCard) -> dict:
    """A card as the audit log keeps it (before/after): JSON, prices as decimal strings."""
    return {
        "code": card.code,
        "name": card.name,
        "effective_from": card.effective_from.isoformat() if card.effective_from else None,
        "note": card.note,
        "gpu_memory_price_per_gb_second": str(card.gpu_memory_price_per_gb_second),
        "nvme_price_per_gb_hour": str(card.nvme_price_per_gb_hour),
        "gpu_prices": {row.gpu_type: str(row.price_per_gpu_second) for row in card.gpu_prices.all()},
    }
