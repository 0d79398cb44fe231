"""Reading rate cards: the only module that turns rate card rows into prices (a frozen
`plans.price_list.Rates`). The rules are in docs/billing.md:

- a run is priced at the card of its plan's code (`Plan.rate_card`) in force at the run's
  pricing moment: the newest card of that code whose `effective_from` is not after it;
- cards are complete: a plan's card prices every GPU type of the plan itself (no borrowing from
  the list card), which `check_plan_prices` makes the admin keep true; a type missing all the
  same is a `PricingError` naming the card and the type when a run of it is priced;
- a month's volume discount tiers are those of the card in force when the month starts.

`rate_card_at` reads one card; `CardBook` reads every card of a code once and answers many
moments (a metering pass, a page of running jobs, the plan pages).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal

from django.core.exceptions import ValidationError
from django.utils import timezone

from plans.catalog import PlanSnapshot
from plans.models import PlanGpuType
from plans.price_list import DiscountTier, Rates
from plans.rate_cards import RateCard

LIST_CARD = "list"


class NoRateCard(LookupError):
    def __init__(self, code: str, moment: datetime):
        super().__init__(f"no rate card {code!r} is in force at {moment.isoformat()}")
        self.code = code
        self.moment = moment


def _cards(code: str):
    return RateCard.objects.filter(code=code).prefetch_related("gpu_prices", "discounts", "spot_multipliers")


def snapshot(card: RateCard) -> Rates:
    return Rates(
        card=card.code,
        name=card.name,
        effective_from=card.effective_from,
        gpu_second={row.gpu_type: row.price_per_gpu_second for row in card.gpu_prices.all()},
        gpu_memory_gb_second=card.gpu_memory_price_per_gb_second,
        nvme_gb_hour=card.nvme_price_per_gb_hour,
        discount_tiers=tuple(DiscountTier(row.min_spend, row.fraction) for row in card.discounts.all()),
        spot_multipliers={(row.gpu_type, row.window): row.multiplier for row in card.spot_multipliers.all()},
    )


def _aware(moment: datetime | None) -> datetime:
    moment = moment or timezone.now()
    if timezone.is_naive(moment):
        # A naive time means a different instant in each time zone: not for prices.
        raise ValueError("moment must be timezone-aware")
    return moment


def rate_card_at(code: str, moment: datetime | None = None) -> Rates:
    """The card `code` in force at `moment` (default now): the newest whose effective_from
    is not after it."""
    moment = _aware(moment)
    card = _cards(code).filter(effective_from__lte=moment).order_by("-effective_from").first()
    if card is None:
        raise NoRateCard(code, moment)
    return snapshot(card)


def rates_for_plan(plan: PlanSnapshot, moment: datetime | None = None) -> Rates:
    """What a plan pays at `moment` (a run's start; default now): its card in force then."""
    return rate_card_at(plan.rate_card, moment)


class CardBook:
    """Every card of each code asked for, read once (three queries a code), for many moments:
    the same answers as `rate_card_at`. A card added meanwhile is seen by the next book."""

    def __init__(self):
        self._by_code: dict[str, list[tuple[RateCard, Rates]]] = {}

    def _of(self, code: str) -> list[tuple[RateCard, Rates]]:
        if code not in self._by_code:
            self._by_code[code] = [(card, snapshot(card)) for card in _cards(code).order_by("-effective_from")]
        return self._by_code[code]

    def card_at(self, code: str, moment: datetime | None = None) -> tuple[Rates, RateCard]:
        """The card `code` in force at `moment`, as prices and as the row (a usage record
        names the row it was priced at)."""
        moment = _aware(moment)
        for card, rates in self._of(code):
            if card.effective_from <= moment:
                return rates, card
        raise NoRateCard(code, moment)

    def for_plan(self, plan: PlanSnapshot, moment: datetime | None = None) -> tuple[Rates, RateCard]:
        return self.card_at(plan.rate_card, moment)


def gpu_prices_for_plan(plan: PlanSnapshot, book: CardBook | None = None) -> dict[str, Decimal]:
    """{GPU type: USD per GPU-second} of the plan's GPU types at its card in force now (the plan
    pages); empty without a card in force, a type its card lacks left out."""
    try:
        rates, _card = (book or CardBook()).for_plan(plan)
    except NoRateCard:
        return {}
    return {gpu_type: rates.gpu_second[gpu_type] for gpu_type in plan.gpu_quota if gpu_type in rates.gpu_second}


def unpriced(code: str, gpu_types: Iterable[str], now: datetime | None = None) -> list[tuple[RateCard, list[str]]]:
    """The cards of `code` that still price usage (the one in force now and every scheduled one)
    and miss a price for some of `gpu_types`, each with the types it misses. Empty: `code`
    prices them all from now on. No card of the code at all: one entry, (None, the types)."""
    now = now or timezone.now()
    wanted = sorted(set(gpu_types))
    cards = list(_cards(code).order_by("-effective_from"))
    live = [card for card in cards if card.effective_from > now]
    in_force = next((card for card in cards if card.effective_from <= now), None)
    if in_force is not None:
        live.append(in_force)
    if not live:
        return [(None, wanted)] if wanted else []
    found = []
    for card in live:
        priced = {row.gpu_type for row in card.gpu_prices.all()}
        missing = [gpu_type for gpu_type in wanted if gpu_type not in priced]
        if missing:
            found.append((card, missing))
    return found


def check_plan_prices(code: str, gpu_types: Iterable[str], *, plan: str = "") -> None:
    """ValidationError, saying which card misses which GPU type, unless the cards of `code`
    price every type of `gpu_types` from now on (a card must price every GPU type it is used for)."""
    problems = unpriced(code, gpu_types)
    if not problems:
        return
    who = f"the plan {plan!r}" if plan else "a plan paying it"
    messages = []
    for card, missing in problems:
        types = ", ".join(missing)
        if card is None:
            messages.append(f"there is no rate card {code!r}: {who} could not be priced ({types})")
        else:
            messages.append(f"the rate card {card} has no price for {types}, which {who} uses")
    raise ValidationError(messages)


def required_gpu_types(code: str, exclude_plan: str = "") -> dict[str, list[str]]:
    """{GPU type: the codes of the plans paying card `code` that use it}."""
    needed: dict[str, list[str]] = {}
    rows = PlanGpuType.objects.filter(plan__rate_card=code).exclude(plan__code=exclude_plan).select_related("plan")
    for row in rows.order_by("plan__code", "gpu_type"):
        needed.setdefault(row.gpu_type, []).append(row.plan.code)
    return needed


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
        "discounts": {str(row.min_spend): str(row.fraction) for row in card.discounts.all()},
    }
