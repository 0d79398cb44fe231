"""Rate cards: the seed (the article's prices and the documented placeholders), the card in
force at a moment, the card a plan pays, cards in force never edited, cards complete for the
plans that pay them, and the admin's audited edits."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.urls import reverse
from django.utils import timezone

from audit.models import AuditLog
from billing.pricing import quote
from plans.catalog import plan_by_code
from plans.models import CardInForce, Plan, RateCard, RateCardGpuPrice
from plans.rates import NoRateCard, rate_card_at, rates_for_plan
from plans.seed import SEED_EFFECTIVE_FROM

pytestmark = pytest.mark.django_db


def test_the_seeded_list_card_has_the_articles_prices_and_gives_its_example():
    card = rate_card_at("list")
    assert card.gpu_second["a100"] == Decimal("0.0015")
    assert card.gpu_memory_gb_second == Decimal("0.00002")
    assert card.nvme_gb_hour == Decimal("0.02")
    assert quote("a100", 1, 1800, gpu_memory_gb=24, nvme_gb=500, rates=card).total == Decimal("8.564")


def test_the_seeded_enterprise_card_has_product_md_prices_and_discount_tiers():
    card = rate_card_at("enterprise")
    assert card.gpu_second["a100"] == Decimal("0.0025")
    assert card.gpu_second["h100"] == Decimal("0.004")
    assert [(tier.min_spend, tier.fraction) for tier in card.discount_tiers] == [
        (Decimal("10000"), Decimal("0.10")),
        (Decimal("5000"), Decimal("0.05")),
    ]
    assert rate_card_at("list").discount_tiers == ()


@pytest.mark.parametrize("code", ["list", "enterprise"])
def test_every_gpu_type_of_the_pool_is_priced_and_placeholders_say_so(code):
    card = rate_card_at(code)
    assert set(settings.GPU_TYPES) <= set(card.gpu_second)
    note = RateCard.objects.get(code=code, effective_from=SEED_EFFECTIVE_FROM).note
    assert "Placeholder" in note and "RTX 4090" in note


def test_the_card_in_force_is_the_newest_not_after_the_moment(make_card):
    january = datetime(2026, 1, 1, tzinfo=UTC)
    march = datetime(2026, 3, 1, tzinfo=UTC)
    make_card("list", january, {"a100": Decimal("0.0016")})
    make_card("list", march, {"a100": Decimal("0.0017")})
    assert rate_card_at("list", january - timedelta(microseconds=1)).gpu_second["a100"] == Decimal("0.0015")
    assert rate_card_at("list", january).gpu_second["a100"] == Decimal("0.0016")
    assert rate_card_at("list", march - timedelta(seconds=1)).gpu_second["a100"] == Decimal("0.0016")
    assert rate_card_at("list", march).effective_from == march
    # A card dated later than now is scheduled, not in force.
    make_card("list", timezone.now() + timedelta(days=1), {"a100": Decimal("1")})
    assert rate_card_at("list").gpu_second["a100"] == Decimal("0.0017")


def test_no_card_before_the_first_and_naive_moments_refused():
    with pytest.raises(NoRateCard):
        rate_card_at("list", SEED_EFFECTIVE_FROM - timedelta(seconds=1))
    with pytest.raises(NoRateCard):
        rate_card_at("gold")
    with pytest.raises(ValueError, match="timezone"):
        rate_card_at("list", datetime(2026, 1, 1))


def test_a_snapshot_is_frozen():
    card = rate_card_at("list")
    with pytest.raises(TypeError):
        card.gpu_second["a100"] = Decimal(0)
    with pytest.raises(AttributeError):
        card.nvme_gb_hour = Decimal(0)


def test_a_card_in_force_is_never_edited_nor_deleted():
    card = RateCard.objects.get(code="list", effective_from=SEED_EFFECTIVE_FROM)
    card.gpu_memory_price_per_gb_second = Decimal("0.00003")
    with pytest.raises(CardInForce):
        card.save()
    with pytest.raises(CardInForce):
        card.delete()
    with pytest.raises(CardInForce):
        RateCard.objects.filter(pk=card.pk).delete()
    with pytest.raises(TypeError):
        RateCard.objects.filter(pk=card.pk).update(nvme_price_per_gb_hour=1)
    price = card.gpu_prices.get(gpu_type="a100")
    price.price_per_gpu_second = Decimal("0.0001")
    with pytest.raises(CardInForce):
        price.save()
    with pytest.raises(CardInForce):
        price.delete()
    with pytest.raises(CardInForce):
        RateCardGpuPrice.objects.create(card=card, gpu_type="b200", price_per_gpu_second=1)
    assert rate_card_at("list").gpu_second["a100"] == Decimal("0.0015")


def test_a_scheduled_card_may_change_until_its_date(make_card):
    card = make_card("list", timezone.now() + timedelta(days=3), {"a100": Decimal("0.002")})
    card.nvme_price_per_gb_hour = Decimal("0.03")
    card.save()
    price = card.gpu_prices.get()
    price.price_per_gpu_second = Decimal("0.0021")
    price.save()
    card.delete()
    assert not RateCard.objects.filter(pk=card.pk).exists()


def test_a_new_card_cannot_start_in_the_past():
    card = RateCard(
        code="list",
        name="Backdated",
        effective_from=timezone.now() - timedelta(minutes=1),
        gpu_memory_price_per_gb_second=Decimal("0.00002"),
        nvme_price_per_gb_hour=Decimal("0.02"),
    )
    with pytest.raises(ValidationError) as caught:
        card.full_clean()
    assert "effective_from" in caught.value.message_dict
    card.effective_from = timezone.now() + timedelta(hours=1)
    card.full_clean()


def test_a_plans_rates_are_the_card_it_names_in_force_then():
    enterprise = rates_for_plan(plan_by_code("enterprise"))
    assert enterprise == rate_card_at("enterprise")
    assert enterprise.gpu_second == {"a100": Decimal("0.0025"), "h100": Decimal("0.004"), "rtx4090": Decimal("0.00048")}
    # The seeded enterprise card repeats the list card's RTX 4090, memory and NVMe prices: the
    # same amounts as when Enterprise paid the list card for everything but A100 and H100.
    listed = rate_card_at("list")
    assert enterprise.gpu_second["rtx4090"] == listed.gpu_second["rtx4090"]
    assert enterprise.gpu_memory_gb_second == listed.gpu_memory_gb_second
    assert enterprise.nvme_gb_hour == listed.nvme_gb_hour
    assert enterprise.gpu_price_source("rtx4090") == "rate card enterprise"
    pro = rates_for_plan(plan_by_code("pro"))
    assert pro == listed and pro.gpu_price_source("a100") == "rate card list"


def test_the_enterprise_price_comes_from_the_enterprise_card_in_force(make_card):
    """A new enterprise card changes what Enterprise pays from its date, and the list card
    does not (it used to be the list card with the plan's own prices laid over it)."""
    later = datetime(2026, 7, 1, tzinfo=UTC)
    make_card("enterprise", later, {"a100": Decimal("0.003"), "h100": Decimal("0.005"), "rtx4090": Decimal("0.0005")})
    make_card("list", later, {"a100": Decimal("0.001"), "h100": Decimal("0.002"), "rtx4090": Decimal("0.0004")})
    enterprise = plan_by_code("enterprise")
    assert rates_for_plan(enterprise, later - timedelta(seconds=1)).gpu_second["a100"] == Decimal("0.0025")
    assert rates_for_plan(enterprise, later).gpu_second["a100"] == Decimal("0.003")
    assert rates_for_plan(enterprise, later).gpu_second["rtx4090"] == Decimal("0.0005")
    assert rates_for_plan(plan_by_code("pro"), later).gpu_second["a100"] == Decimal("0.001")


def test_a_card_missing_a_gpu_type_of_its_plan_is_a_pricing_error_naming_both(make_card):
    """Cards are complete: nothing is borrowed from the list card. A card that lacks a type (one
    written around the admin's check) fails when a run of that type is priced, naming the card
    and the type."""
    from billing.pricing import PricingError

    make_card("enterprise", datetime(2026, 7, 1, tzinfo=UTC), {"a100": Decimal("0.003")})
    rates = rates_for_plan(plan_by_code("enterprise"), datetime(2026, 7, 2, tzinfo=UTC))
    with pytest.raises(PricingError) as caught:
        quote("h100", 1, 60, rates=rates)
    assert caught.value.field == "gpu_type"
    assert "'enterprise' has no price for 'h100'" in str(caught.value)


@pytest.fixture
def staff(db):
    return get_user_model().objects.create_superuser("root", "root@x.org", "pw-root")


# A card for every GPU type the seeded plans use (the admin refuses one that leaves a type unpriced).
FULL = (("a100", "0.0018"), ("h100", "0.0024"), ("rtx4090", "0.00048"))
FULL_SAVED = {"a100": "0.00180000", "h100": "0.00240000", "rtx4090": "0.00048000"}


def _card_form(code="list", when=None, prices=FULL, discounts=(), **fields):
    when = when or timezone.now() + timedelta(days=7)
    data = {
        "code": code,
        "name": "List prices from next week",
        "effective_from_0": when.strftime("%Y-%m-%d"),
        "effective_from_1": when.strftime("%H:%M:%S"),
        "gpu_memory_price_per_gb_second": "0.00002",
        "nvme_price_per_gb_hour": "0.02",
        "note": "",
        "gpu_prices-TOTAL_FORMS": str(len(prices)),
        "gpu_prices-INITIAL_FORMS": "0",
        "gpu_prices-MIN_NUM_FORMS": "0",
        "gpu_prices-MAX_NUM_FORMS": "1000",
        "discounts-TOTAL_FORMS": str(len(discounts)),
        "discounts-INITIAL_FORMS": "0",
        "discounts-MIN_NUM_FORMS": "0",
        "discounts-MAX_NUM_FORMS": "1000",
        "spot_multipliers-TOTAL_FORMS": "0",
        "spot_multipliers-INITIAL_FORMS": "0",
        "spot_multipliers-MIN_NUM_FORMS": "0",
        "spot_multipliers-MAX_NUM_FORMS": "1000",
    }
    for index, (gpu_type, price) in enumerate(prices):
        data[f"gpu_prices-{index}-gpu_type"] = gpu_type
        data[f"gpu_prices-{index}-price_per_gpu_second"] = price
    for index, (spend, fraction) in enumerate(discounts):
        data[f"discounts-{index}-min_spend"] = spend
        data[f"discounts-{index}-fraction"] = fraction
    data.update(fields)
    return data


def test_admin_adds_a_card_and_the_audit_log_has_it(client, staff):
    client.force_login(staff)
    response = client.post(reverse("admin:plans_ratecard_add"), _card_form())
    assert response.status_code == 302, response.content.decode()[:2000]
    card = RateCard.objects.exclude(effective_from=SEED_EFFECTIVE_FROM).get(code="list")
    assert card.created_by == staff
    entry = AuditLog.objects.get(action="rate_card.create")
    assert entry.actor == staff
    assert entry.after["gpu_prices"] == FULL_SAVED
    assert entry.after["discounts"] == {}
    assert entry.target == f"rate_card:list@{card.effective_from.isoformat()}"


def test_admin_adds_an_enterprise_card_with_new_tiers_audited(client, staff):
    client.force_login(staff)
    data = _card_form(code="enterprise", discounts=(("4000", "0.06"), ("8000", "0.12")))
    response = client.post(reverse("admin:plans_ratecard_add"), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    card = RateCard.objects.exclude(effective_from=SEED_EFFECTIVE_FROM).get(code="enterprise")
    assert rate_card_at("enterprise", card.effective_from).discount_tiers[0].fraction == Decimal("0.12")
    entry = AuditLog.objects.get(action="rate_card.create")
    assert entry.after["discounts"] == {"4000.00": "0.0600", "8000.00": "0.1200"}


def test_admin_refuses_a_card_that_leaves_a_gpu_type_of_its_plans_unpriced(client, staff):
    """Cards are complete: an enterprise card without H100 and RTX 4090 would leave Enterprise's
    runs of them unpriced from its date, so it is refused, naming the types and the plan."""
    client.force_login(staff)
    response = client.post(
        reverse("admin:plans_ratecard_add"), _card_form(code="enterprise", prices=(("a100", "0.003"),))
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert "must price every GPU type of the plans that pay it" in body
    assert "h100 (plan enterprise)" in body and "rtx4090 (plan enterprise)" in body
    assert RateCard.objects.filter(code="enterprise").count() == 1
    assert not AuditLog.objects.filter(action__startswith="rate_card").exists()


def test_admin_refuses_a_plan_its_card_cannot_price(client, staff, make_card):
    """A plan given a GPU type its card (in force, or scheduled) does not price, or a card code
    with no card at all, is refused on save, naming the card and the type."""
    from testing.admin_forms import change_form_data

    client.force_login(staff)
    make_card("list", timezone.now() + timedelta(days=3), {"a100": Decimal("0.002"), "rtx4090": Decimal("0.0005")})
    pro = Plan.objects.get(code="pro")
    url = reverse("admin:plans_plan_change", args=[pro.pk])
    data = change_form_data(client.get(url))
    rows = int(data["gpu_types-TOTAL_FORMS"])
    data.update(
        {
            "gpu_types-TOTAL_FORMS": str(rows + 1),
            f"gpu_types-{rows}-gpu_type": "h100",
            f"gpu_types-{rows}-max_concurrent": "1",
            f"gpu_types-{rows}-included_hours": "0",
        }
    )
    body = client.post(url, data).content.decode()
    assert "has no price for h100, which the plan" in body and "list from" in body
    assert not pro.gpu_types.filter(gpu_type="h100").exists()
    data = {**change_form_data(client.get(url)), "rate_card": "gold"}
    body = client.post(url, data).content.decode()
    assert "there is no rate card" in body and "gold" in body
    pro.refresh_from_db()
    assert pro.rate_card == "list"
    assert not AuditLog.objects.filter(action="plan.change").exists()


def test_admin_refuses_a_backdated_card_and_an_unknown_gpu_type(client, staff):
    client.force_login(staff)
    response = client.post(reverse("admin:plans_ratecard_add"), _card_form(when=timezone.now() - timedelta(days=1)))
    assert response.status_code == 200
    assert "cannot start in the past" in response.content.decode()
    response = client.post(reverse("admin:plans_ratecard_add"), _card_form(prices=(*FULL, ("b200", "1"))))
    assert response.status_code == 200
    assert "not a GPU type of the pool" in response.content.decode()
    assert RateCard.objects.count() == 2
    assert not AuditLog.objects.filter(action__startswith="rate_card").exists()


def test_admin_cannot_change_a_card_in_force(client, staff):
    client.force_login(staff)
    card = RateCard.objects.get(code="list", effective_from=SEED_EFFECTIVE_FROM)
    url = reverse("admin:plans_ratecard_change", args=[card.pk])
    page = client.get(url)
    assert page.status_code == 200
    assert f"?from={card.pk}" in page.content.decode()  # the way to a new card from its prices
    response = client.post(url, _card_form(when=SEED_EFFECTIVE_FROM, nvme_price_per_gb_hour="9"))
    assert response.status_code == 403
    assert client.post(reverse("admin:plans_ratecard_delete", args=[card.pk]), {"post": "yes"}).status_code == 403
    card.refresh_from_db()
    assert card.nvme_price_per_gb_hour == Decimal("0.02")


def test_admin_new_card_from_a_card_in_force_starts_from_its_prices(client, staff):
    client.force_login(staff)
    card = RateCard.objects.get(code="enterprise", effective_from=SEED_EFFECTIVE_FROM)
    page = client.get(reverse("admin:plans_ratecard_add") + f"?from={card.pk}").content.decode()
    assert 'value="enterprise"' in page
    assert 'value="0.00400000"' in page  # the H100 price, to edit


def test_admin_edits_and_withdraws_a_scheduled_card_audited(client, staff, make_card):
    client.force_login(staff)
    when = (timezone.now() + timedelta(days=2)).replace(microsecond=0)
    card = make_card("list", when, {gpu_type: Decimal(price) for gpu_type, price in FULL})
    data = _card_form(when=when, prices=(("a100", "0.0022"), *FULL[1:]))
    data["gpu_prices-INITIAL_FORMS"] = "3"
    for index, (gpu_type, _price) in enumerate(FULL):
        data[f"gpu_prices-{index}-id"] = str(card.gpu_prices.get(gpu_type=gpu_type).pk)
        data[f"gpu_prices-{index}-card"] = str(card.pk)
    response = client.post(reverse("admin:plans_ratecard_change", args=[card.pk]), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    entry = AuditLog.objects.get(action="rate_card.change")
    assert entry.before["gpu_prices"] == FULL_SAVED
    assert entry.after["gpu_prices"] == {**FULL_SAVED, "a100": "0.00220000"}
    response = client.post(reverse("admin:plans_ratecard_delete", args=[card.pk]), {"post": "yes"})
    assert response.status_code == 302
    assert not RateCard.objects.filter(pk=card.pk).exists()
    assert AuditLog.objects.get(action="rate_card.delete").before["gpu_prices"] == {**FULL_SAVED, "a100": "0.00220000"}
