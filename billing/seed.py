"""The rate cards of docs/product.md and the issue, as data: the seed of the rate cards (migration
0002) and, after transactional tests have emptied the tables, again (billing/tests/conftest.py).

Where docs/product.md names no price a placeholder is seeded, by one stated rule, and its card's
note says so; an admin replaces it with a new card (cards in force are never edited):
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

# Before any usage the portal has recorded: the seeded cards price everything from the start.
SEED_EFFECTIVE_FROM = datetime(2020, 1, 1, tzinfo=UTC)

PLACEHOLDER_NOTE = (
    "Placeholders (docs/product.md names no price): {types}. Priced by the rule in billing/seed.py; "
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
        "note": "docs/product.md's Enterprise prices: A100 $0.0025/s, H100 $0.004/s; memory and NVMe as the list card. "
        + PLACEHOLDER_NOTE.format(types="RTX 4090 $0.00048/s (24 GB x $0.00002)"),
    },
]


def seed_rate_cards(card_model, price_model) -> int:
    """Create the seeded cards that do not exist yet (by code and date; an admin's later cards
    are kept). The models are parameters so the migration can pass its historical ones; the
    prices go in with bulk_create because the card is dated in the past, and the model
    refuses price edits on a card in force one by one."""
    created_count = 0
    for spec in PRODUCT_RATE_CARDS:
        fields = {key: value for key, value in spec.items() if key not in {"code", "gpu_prices"}}
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
    return created_count
