"""Rate cards: the one home of per-use prices (GPU-seconds by type, GPU memory, NVMe) and of
the volume discount tiers, with effective dates (docs/billing.md).

A card is a code ("list", "enterprise") and the moment from which it is in force; the card in
force at a moment is the newest of its code whose `effective_from` is not after it
(`plans.rates.rate_card_at`). A plan names the code it pays (`Plan.rate_card`). Once in force a
card is never edited or deleted: usage already priced at it must keep its price. A price change
is a new card of the same code with a later `effective_from`. A card not yet in force
(scheduled) may still be edited or withdrawn.

The tables keep the names they had when these models lived in billing (`billing_ratecard`,
`billing_ratecardgpuprice`): the move (plans migration 0005) changed no rows. They sit with the
catalogue because the plan pages (accounts, a lower layer than billing) show their prices.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from django.utils import timezone

SLUG = RegexValidator(r"^[a-z][a-z0-9_-]{0,31}\Z", "lower-case letters, digits, - and _ (at most 32)")

# Prices in USD with 8 places: $0.00002/GB-s (the article's memory price) and smaller hold
# exactly; 6 integer digits leave room for any per-second or per-GB-hour price.
PRICE = {"max_digits": 14, "decimal_places": 8, "validators": [MinValueValidator(0)]}


class CardInForce(Exception):
    """An edit or deletion of a card (or one of its prices) that is already in force."""


class RateCardQuerySet(models.QuerySet):
    def update(self, **kwargs):
        # A bulk UPDATE would skip the in-force check in save(); cards change through save().
        raise TypeError("rate cards change one at a time through save(), which refuses cards in force")

    def delete(self):
        if self.filter(effective_from__lte=timezone.now()).exists():
            raise CardInForce("a rate card in force is never deleted")
        return super().delete()


class RateCard(models.Model):
    name = models.CharField(max_length=64)
    code = models.CharField(
        max_length=32, validators=[SLUG], help_text='Which price list this is, e.g. "list" or "enterprise"'
    )
    effective_from = models.DateTimeField(
        help_text="From when these prices apply. Not in the past: a change of price is a new card "
        "with a later date, and a card in force can no longer be edited."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    note = models.TextField(blank=True, help_text="Why these prices (placeholders say so here)")
    gpu_memory_price_per_gb_second = models.DecimalField(
        **PRICE, help_text="USD per GB-second of GPU memory (the article: 0.00002)"
    )
    nvme_price_per_gb_hour = models.DecimalField(**PRICE, help_text="USD per GB-hour of NVMe cache (the article: 0.02)")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = RateCardQuerySet.as_manager()

    class Meta:
        db_table = "billing_ratecard"
        ordering = ["code", "-effective_from"]
        constraints = [models.UniqueConstraint(fields=["code", "effective_from"], name="one_card_per_code_and_moment")]

    def __str__(self):
        return f"{self.code} from {self.effective_from:%Y-%m-%d %H:%M}"

    def save(self, *args, **kwargs):
        stored = self._stored()
        if stored is not None and stored.in_force_since():
            raise CardInForce(f"{stored} is in force: add a new card with a later effective date instead")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        stored = self._stored()
        if stored is not None and stored.in_force_since():
            raise CardInForce(f"{stored} is in force and is never deleted")
        return super().delete(*args, **kwargs)

    def in_force_since(self, now=None) -> bool:
        """True once `effective_from` has come (the card may have been replaced since: it is
        still the card of the usage priced while it was in force)."""
        return self.effective_from is not None and self.effective_from <= (now or timezone.now())

    def _stored(self) -> RateCard | None:
        if self.pk is None:
            return None
        return RateCard.objects.filter(pk=self.pk).first()

    def clean(self):
        super().clean()
        # Checked here (the admin's path) rather than in save(): the seed migration and tests
        # write cards dated in the past on purpose.
        stored = self._stored()
        if self.effective_from is not None and self.effective_from < timezone.now():
            if stored is None or stored.effective_from != self.effective_from:
                raise ValidationError(
                    {"effective_from": "A card cannot start in the past: usage already priced would change."}
                )


class CardRow(models.Model):
    """A row of a card (a GPU price, a discount tier): it changes only while its card is
    scheduled, like the card itself."""

    card = models.ForeignKey(RateCard, on_delete=models.CASCADE)

    class Meta:
        abstract = True

    def save(self, *args, **kwargs):
        if self._card_in_force():
            raise CardInForce(f"the card of {self} is in force: its prices no longer change")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if self._card_in_force():
            raise CardInForce(f"the card of {self} is in force: its prices no longer change")
        return super().delete(*args, **kwargs)

    def _card_in_force(self) -> bool:
        # The stored card's date, not the instance's: a form could carry a changed one.
        stored = RateCard.objects.filter(pk=self.card_id).first()
        return stored is not None and stored.in_force_since()


class RateCardGpuPrice(CardRow):
    """One GPU type's price on a card; a type without a row cannot be priced by that card."""

    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="gpu_prices")
    gpu_type = models.CharField(max_length=32, validators=[SLUG])
    price_per_gpu_second = models.DecimalField(**PRICE, help_text="USD per GPU-second")

    class Meta:
        db_table = "billing_ratecardgpuprice"
        ordering = ["card", "gpu_type"]
        constraints = [models.UniqueConstraint(fields=["card", "gpu_type"], name="one_price_per_card_and_gpu_type")]

    def __str__(self):
        return f"{self.card.code}/{self.gpu_type}"

    def clean(self):
        super().clean()
        if self.gpu_type and self.gpu_type not in settings.GPU_TYPES:
            raise ValidationError({"gpu_type": f"not a GPU type of the pool ({', '.join(settings.GPU_TYPES)})"})


class RateCardDiscount(CardRow):
    """A volume discount tier of a card: a month whose usage under a plan paying this card comes
    to at least `min_spend` takes `fraction` off the whole month. The card that governs a month
    is the one in force when the month starts (00:00 on its first day in the billing zone), so a
    tier changed from next month leaves this month alone. A card without tiers gives none."""

    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="discounts")
    min_spend = models.DecimalField(
        max_digits=12, decimal_places=2, validators=[MinValueValidator(0)], help_text="USD of usage in the month"
    )
    fraction = models.DecimalField(
        max_digits=5,
        decimal_places=4,
        validators=[MinValueValidator(0), MaxValueValidator(Decimal("0.9999"))],
        help_text="Taken off the whole month (0.05 is 5 %)",
    )

    class Meta:
        ordering = ["card", "min_spend"]
        constraints = [
            models.UniqueConstraint(fields=["card", "min_spend"], name="one_tier_per_card_and_spend"),
            models.CheckConstraint(
                condition=models.Q(fraction__gte=0, fraction__lt=1), name="a_discount_takes_less_than_all"
            ),
        ]

    def __str__(self):
        return f"{self.card.code}: {self.fraction} off from ${self.min_spend}"


class RateCardSpotMultiplier(CardRow):
    """What a spot job pays of a GPU type's price on this card, by time window (plans/spot.py:
    "night" 22:00-06:00 in SPOT_TIMEZONE, "day" the rest): 0.40 is 40 % of the price. Dated and
    frozen with its card like every price. A card without a row for a type and window charges
    spot runs there the full price (never less than the card says)."""

    class Window(models.TextChoices):
        NIGHT = "night"
        DAY = "day"

    card = models.ForeignKey(RateCard, on_delete=models.CASCADE, related_name="spot_multipliers")
    gpu_type = models.CharField(max_length=32, validators=[SLUG])
    window = models.CharField(max_length=8, choices=Window.choices)
    multiplier = models.DecimalField(
        max_digits=5,
        decimal_places=4,
        validators=[MinValueValidator(Decimal("0.0001")), MaxValueValidator(1)],
        help_text="Share of the GPU price a spot run pays in this window (0.4000 is 40 %)",
    )

    class Meta:
        ordering = ["card", "gpu_type", "window"]
        constraints = [
            models.UniqueConstraint(fields=["card", "gpu_type", "window"], name="one_spot_multiplier_per_window"),
            models.CheckConstraint(
                condition=models.Q(multiplier__gt=0, multiplier__lte=1), name="spot_pays_something_never_more"
            ),
        ]

    def __str__(self):
        return f"{self.card.code}/{self.gpu_type} spot {self.window} x{self.multiplier}"
