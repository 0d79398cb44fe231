import pytest


@pytest.fixture(autouse=True)
def _product_rate_cards(request):
    """Transactional tests empty every table when they end, the seeded rate cards too: put
    them back before each billing test that uses the database (as the root conftest does
    for plans)."""
    uses_database = request.node.get_closest_marker("django_db") is not None or bool(
        {"db", "transactional_db"} & set(request.fixturenames)
    )
    if not uses_database:
        return
    request.getfixturevalue("_django_db_helper")
    from billing.models import RateCard, RateCardGpuPrice
    from billing.seed import seed_rate_cards

    seed_rate_cards(RateCard, RateCardGpuPrice)


@pytest.fixture
def make_card(db):
    """make_card(code, effective_from, {gpu_type: price}, memory=..., nvme=...) -> RateCard,
    dated anywhere (the admin refuses past dates; tests need them)."""
    from decimal import Decimal

    from billing.models import RateCard, RateCardGpuPrice

    def _make(code, effective_from, gpu_prices, memory=Decimal("0.00002"), nvme=Decimal("0.02"), name=""):
        card = RateCard.objects.create(
            code=code,
            name=name or code,
            effective_from=effective_from,
            gpu_memory_price_per_gb_second=memory,
            nvme_price_per_gb_hour=nvme,
        )
        # bulk_create: the single-row save refuses prices on a card already in force.
        RateCardGpuPrice.objects.bulk_create(
            RateCardGpuPrice(card=card, gpu_type=gpu_type, price_per_gpu_second=price)
            for gpu_type, price in gpu_prices.items()
        )
        return card

    return _make
