import pytest


@pytest.fixture
def make_card(db):
    """make_card(code, effective_from, {gpu_type: price}, memory=..., nvme=..., discounts=[(min
    spend, fraction)]) -> RateCard,
    dated anywhere (the admin refuses past dates; tests need them)."""
    from decimal import Decimal

    from plans.models import RateCard, RateCardDiscount, RateCardGpuPrice

    def _make(code, effective_from, gpu_prices, memory=Decimal("0.00002"), nvme=Decimal("0.02"), name="", discounts=()):
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
        RateCardDiscount.objects.bulk_create(
            RateCardDiscount(card=card, min_spend=spend, fraction=fraction) for spend, fraction in discounts
        )
        return card

    return _make
