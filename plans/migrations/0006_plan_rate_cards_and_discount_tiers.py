"""One home for each price, with dates (docs/billing.md): a plan names the rate card it pays
(`Plan.rate_card`) instead of carrying its own per-second GPU prices (`PlanGpuType.rate_per_second`,
which had no dates: changing it repriced every run not yet charged), and the volume discount
tiers become dated rows of a card (`RateCardDiscount`) instead of constants in the code.

The data moves so that every run is priced as before:
- a plan without prices of its own pays the list card, as it did;
- a plan with its own prices (Enterprise) pays the cards of its own code when those already
  give, at every date, the list card's prices with the plan's laid over them (the seeded
  enterprise card does); otherwise cards with exactly those prices are written, one at each
  list card's date, under the plan's code (or "<code>-plan" where cards of that code exist and
  differ), and the plan pays them;
- the discounted plan (Enterprise) gets its own card code the same way, and the tiers that were
  in the code (5 % from $5,000, 10 % from $10,000 a month) go onto every card of that code.
"""

from decimal import Decimal

import django.core.validators
import django.db.models.deletion
from django.db import migrations, models

# billing/pricing.py's VOLUME_DISCOUNTS and billing/invoices/invoicing.py's VOLUME_DISCOUNT_PLANS until now.
VOLUME_DISCOUNTS = [(Decimal("5000"), Decimal("0.05")), (Decimal("10000"), Decimal("0.10"))]
DISCOUNTED_PLANS = {"enterprise"}
LIST_CARD = "list"
SLUG = django.core.validators.RegexValidator(
    "^[a-z][a-z0-9_-]{0,31}\\Z", "lower-case letters, digits, - and _ (at most 32)"
)


def _in_force(cards, moment):
    """The newest of `cards` (oldest first) whose date is not after `moment`, else None."""
    found = None
    for card in cards:
        if card.effective_from <= moment:
            found = card
    return found


def _gpu_prices(card) -> dict:
    return {row.gpu_type: row.price_per_gpu_second for row in card.gpu_prices.all()}


def _gives_the_same(own_cards, list_cards, own_prices) -> bool:
    """Whether `own_cards` price, at every date, what the list card with the plan's prices laid
    over it did (a type the list card lacked may be priced now; it could not be charged before)."""
    if not own_cards:
        return False
    for moment in sorted({card.effective_from for card in [*own_cards, *list_cards]}):
        listed = _in_force(list_cards, moment)
        if listed is None:
            continue  # nothing could be priced then
        own = _in_force(own_cards, moment)
        if own is None:
            return False
        expected = {**_gpu_prices(listed), **own_prices}
        given = _gpu_prices(own)
        if any(given.get(gpu_type) != price for gpu_type, price in expected.items()):
            return False
        if (own.gpu_memory_price_per_gb_second, own.nvme_price_per_gb_hour) != (
            listed.gpu_memory_price_per_gb_second,
            listed.nvme_price_per_gb_hour,
        ):
            return False
    return True


def _code_for(RateCard, plan_code: str, own_prices: dict, list_cards) -> tuple[str, bool]:
    """The card code the plan pays from now on, and whether its cards must be written: the
    first of "<code>", "<code>-plan", "<code>-plan2"... whose cards give what the plan paid (a
    migration undone and done again finds its own), or the first with no cards at all."""
    number = 0
    while True:
        suffix = "" if number == 0 else ("-plan" if number == 1 else f"-plan{number}")
        code = plan_code[: 32 - len(suffix)] + suffix
        cards = list(RateCard.objects.filter(code=code).order_by("effective_from").prefetch_related("gpu_prices"))
        if not cards:
            return code, True
        if code != LIST_CARD and _gives_the_same(cards, list_cards, own_prices):
            return code, False
        number += 1


def move_plan_prices(apps, schema_editor):
    Plan = apps.get_model("plans", "Plan")
    RateCard = apps.get_model("plans", "RateCard")
    RateCardGpuPrice = apps.get_model("plans", "RateCardGpuPrice")
    RateCardDiscount = apps.get_model("plans", "RateCardDiscount")
    list_cards = list(RateCard.objects.filter(code=LIST_CARD).order_by("effective_from").prefetch_related("gpu_prices"))
    for plan in Plan.objects.prefetch_related("gpu_types").order_by("code"):
        own_prices = {
            row.gpu_type: row.rate_per_second for row in plan.gpu_types.all() if row.rate_per_second is not None
        }
        if not own_prices and plan.code not in DISCOUNTED_PLANS:
            continue  # the list card, as before
        code, write = _code_for(RateCard, plan.code, own_prices, list_cards)
        if write:
            for listed in list_cards:
                card = RateCard.objects.create(
                    code=code,
                    name=f"{plan.name} (moved from the plan's prices)",
                    effective_from=listed.effective_from,
                    gpu_memory_price_per_gb_second=listed.gpu_memory_price_per_gb_second,
                    nvme_price_per_gb_hour=listed.nvme_price_per_gb_hour,
                    note=f"The list card {listed.code} from {listed.effective_from:%Y-%m-%d} with the {plan.name} "
                    "plan's own per-second GPU prices in place of its own, as the plan was priced until they "
                    "moved onto rate cards.",
                )
                RateCardGpuPrice.objects.bulk_create(
                    RateCardGpuPrice(card=card, gpu_type=gpu_type, price_per_gpu_second=price)
                    for gpu_type, price in {**_gpu_prices(listed), **own_prices}.items()
                )
        plan.rate_card = code
        plan.save(update_fields=["rate_card"])
        if plan.code in DISCOUNTED_PLANS:
            for card in RateCard.objects.filter(code=code):
                for spend, fraction in VOLUME_DISCOUNTS:
                    RateCardDiscount.objects.get_or_create(card=card, min_spend=spend, defaults={"fraction": fraction})


def restore_plan_prices(apps, schema_editor):
    """Back: a plan not paying the list card gets, as its own prices, those of its card in force
    now that differ from the list card's (the tiers go back to being constants in the code)."""
    from django.utils import timezone

    Plan = apps.get_model("plans", "Plan")
    RateCard = apps.get_model("plans", "RateCard")
    now = timezone.now()

    def in_force(code):
        card = RateCard.objects.filter(code=code, effective_from__lte=now).order_by("-effective_from").first()
        return _gpu_prices(card) if card else {}

    listed = in_force(LIST_CARD)
    for plan in Plan.objects.exclude(rate_card=LIST_CARD).prefetch_related("gpu_types"):
        prices = in_force(plan.rate_card)
        for row in plan.gpu_types.all():
            price = prices.get(row.gpu_type)
            if price is not None and price != listed.get(row.gpu_type):
                row.rate_per_second = price
                row.save(update_fields=["rate_per_second"])


class Migration(migrations.Migration):
    dependencies = [
        ("plans", "0005_rate_cards_move"),
    ]

    operations = [
        migrations.CreateModel(
            name="RateCardDiscount",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "min_spend",
                    models.DecimalField(
                        decimal_places=2,
                        help_text="USD of usage in the month",
                        max_digits=12,
                        validators=[django.core.validators.MinValueValidator(0)],
                    ),
                ),
                (
                    "fraction",
                    models.DecimalField(
                        decimal_places=4,
                        help_text="Taken off the whole month (0.05 is 5 %)",
                        max_digits=5,
                        validators=[
                            django.core.validators.MinValueValidator(0),
                            django.core.validators.MaxValueValidator(Decimal("0.9999")),
                        ],
                    ),
                ),
                (
                    "card",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="discounts", to="plans.ratecard"
                    ),
                ),
            ],
            options={
                "ordering": ["card", "min_spend"],
                "constraints": [
                    models.UniqueConstraint(fields=("card", "min_spend"), name="one_tier_per_card_and_spend"),
                    models.CheckConstraint(
                        condition=models.Q(("fraction__gte", 0), ("fraction__lt", 1)),
                        name="a_discount_takes_less_than_all",
                    ),
                ],
            },
        ),
        migrations.AddField(
            model_name="plan",
            name="rate_card",
            field=models.CharField(
                default="list",
                help_text='The rate card its usage is priced at: "list" for most plans, "enterprise" for Enterprise',
                max_length=32,
                validators=[SLUG],
            ),
        ),
        migrations.RunPython(move_plan_prices, restore_plan_prices),
        migrations.RemoveField(model_name="plangputype", name="rate_per_second"),
    ]
