"""docs/product.md's catalogue as data, put into empty tables: its plans (plans/product_plans.py)
and its rate cards (below). The data migrations do it once; the test suite does it again after
transactional tests have emptied every table.

The rate cards: billing migration 0002 seeded them (their tables were billing's then), plans
migration 0006 gave the enterprise card its discount tiers. Cards are complete (docs/billing.md):
each prices every GPU type of the pool. Where docs/product.md names no price a placeholder is
seeded, by one stated rule, and its card's note says so; an admin replaces it with a new card
(cards in force are never edited):
- RTX 4090 (both cards): 24 GB at the article's memory price, 24 x $0.00002 = $0.00048/s,
  the price of its memory held for a second (docs/product.md prices memory, not this card).
- H100 on the list card: the A100's list price scaled as on the enterprise card
  (H100/A100 = 0.004/0.0025 = 1.6), so 1.6 x $0.0015 = $0.0024/s.
- Enterprise GPU memory and NVMe: docs/product.md gives Enterprise per-second GPU prices only, so
  the enterprise card repeats the list card's memory and NVMe prices.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

from plans.product_plans import PRODUCT_PLANS

# Before any usage the portal has recorded: the seeded cards price everything from the start.
SEED_EFFECTIVE_FROM = datetime(2020, 1, 1, tzinfo=UTC)

PLACEHOLDER_NOTE = (
    "Placeholders (docs/product.md names no price): {types}. Priced by the rule in plans/seed.py; "
    "replace them with a new card with a later effective date."
)

PRODUCT_RATE_CARDS = [
    {
        "code": "list",
        "name": "List prices",
        "gpu_memory_price_per_gb_second": Decimal("0.00002"),
        "nvme_price_per_gb_hour": Decimal("0.02"),
        # (GPU type, USD per GPU-second)
        "gpu_prices": [("a100", Decimal("0.0015")), ("h100", Decimal("0.0024")), ("rtx4090", Decimal("0.00048"))],
        "note": "The article's list prices: A100 $0.0015/s, memory $0.00002/GB-s, NVMe $0.02/GB-h. "
        + PLACEHOLDER_NOTE.format(
            types="H100 $0.0024/s (1.6 x A100, the enterprise ratio), RTX 4090 $0.00048/s (24 GB x $0.00002)"
        ),
    },
    {
        "code": "enterprise",
        "name": "Enterprise",
        "gpu_memory_price_per_gb_second": Decimal("0.00002"),
        "nvme_price_per_gb_hour": Decimal("0.02"),
        "gpu_prices": [("a100", Decimal("0.0025")), ("h100", Decimal("0.004")), ("rtx4090", Decimal("0.00048"))],
        # (min spend in a month, fraction off the whole month): docs/product.md's volume discount.
        "discounts": [(Decimal("5000"), Decimal("0.05")), (Decimal("10000"), Decimal("0.10"))],
        "note": "docs/product.md's Enterprise prices: A100 $0.0025/s, H100 $0.004/s, volume discount 5 % from "
        "$5,000 and 10 % from $10,000 a month; memory and NVMe as the list card. "
        + PLACEHOLDER_NOTE.format(types="RTX 4090 $0.00048/s (24 GB x $0.00002)"),
    },
]


def seed_rate_cards(card_model, price_model, discount_model=None) -> int:
    """Create the seeded cards that do not exist yet (by code and date; an admin's later cards
    are kept). The models are parameters so the migrations can pass their historical ones
    (without `discount_model`, from before cards had tiers, no tiers); the rows go in with
    bulk_create because the card is dated in the past, and the models refuse edits of a card in
    force one by one."""
    created_count = 0
    for spec in PRODUCT_RATE_CARDS:
        fields = {key: value for key, value in spec.items() if key not in {"code", "gpu_prices", "discounts"}}
        card, created = card_model.objects.get_or_create(
            code=spec["code"], effective_from=SEED_EFFECTIVE_FROM, defaults=fields
        )
        if not created:
            continue
        created_count += 1
        price_model.objects.bulk_create(
            price_model(card=card, gpu_type=gpu_type, price_per_gpu_second=price)
            for gpu_type, price in spec["gpu_prices"]
        )
        if discount_model is not None:
            discount_model.objects.bulk_create(
                discount_model(card=card, min_spend=spend, fraction=fraction)
                for spend, fraction in spec.get("discounts", ())
            )
    return created_count


# The spot shares plans migration 0007 gave every card then (docs/billing.md, spot).
SEED_SPOT_SHARES = {"night": Decimal("0.4000"), "day": Decimal("0.7000")}


def seed_spot_shares(card_model, multiplier_model) -> int:
    """The seeded cards' spot shares where a card has none (a transactional test's flush empties
    them with the cards): each GPU price of the card, both windows."""
    rows = [
        multiplier_model(card=card, gpu_type=price.gpu_type, window=window, multiplier=share)
        for card in card_model.objects.filter(effective_from=SEED_EFFECTIVE_FROM, spot_multipliers__isnull=True)
        .prefetch_related("gpu_prices")
        .distinct()
        for price in card.gpu_prices.all()
        for window, share in SEED_SPOT_SHARES.items()
    ]
    multiplier_model.objects.bulk_create(rows)
    return len(rows)


def seed_product_plans(plan_model, gpu_type_model) -> int:
    """Create the plans that do not exist yet (an admin's edits to existing ones are kept);
    the models are parameters so the migration can pass its historical ones."""
    created_count = 0
    # A migration's historical model may predate some fields: seed only the ones it has.
    known = {model_field.name for model_field in plan_model._meta.get_fields()}
    for spec in PRODUCT_PLANS:
        fields = {key: value for key, value in spec.items() if key in known and key not in {"code", "gpu_types"}}
        plan, created = plan_model.objects.get_or_create(code=spec["code"], defaults=fields)
        if not created:
            continue
        created_count += 1
        for gpu_type, concurrent, hours in spec["gpu_types"]:
            gpu_type_model.objects.create(plan=plan, gpu_type=gpu_type, max_concurrent=concurrent, included_hours=hours)
    return created_count
