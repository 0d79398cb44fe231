"""The plan catalogue and each user's subscription history (docs/product.md, "Plans").

Plans are rows an admin edits; a user's plan is the newest of their subscription rows,
never a string overwritten in place: a change of plan or a pause ends the current row and
starts a new one. Read plans through `plans.catalog.plan_for(user)`, which returns a frozen
snapshot; Slurm gets the same limits from it (accounts/actions/__init__.py, `manage.py slurm_limits`).
"""

from datetime import date, datetime
from zoneinfo import ZoneInfo

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models, transaction
from django.db.models import Q
from django.db.models.functions import Coalesce
from django.utils import timezone

# The rate cards are the catalogue's prices; their models live beside this module.
from plans.rate_cards import SLUG, CardInForce, RateCard, RateCardDiscount, RateCardGpuPrice, RateCardSpotMultiplier

__all__ = [
    "SINCE_THE_START",
    "CardInForce",
    "MonthlyUsageReset",
    "Plan",
    "PlanGpuType",
    "PlanPrice",
    "RateCard",
    "RateCardDiscount",
    "RateCardGpuPrice",
    "RateCardSpotMultiplier",
    "Subscription",
]


class Plan(models.Model):
    code = models.CharField(max_length=32, unique=True, validators=[SLUG])
    name = models.CharField(max_length=64)
    # The Slurm QOS the plan's jobs run under; its limits are written from this row.
    qos = models.CharField(max_length=32, validators=[SLUG])
    priority = models.PositiveIntegerField(
        default=1000, help_text="The QOS priority (PRODUCT.md: paid 10000, free 1000)"
    )
    monthly_price = models.DecimalField(max_digits=10, decimal_places=2, default=0, validators=[MinValueValidator(0)])
    max_job_minutes = models.PositiveIntegerField(validators=[MinValueValidator(1)])
    official_images_only = models.BooleanField(default=False)
    # True: the included hours are all there is (free). False: use beyond them is billed (pro).
    included_hours_are_a_cap = models.BooleanField(default=False)
    included_nvme_gb = models.PositiveIntegerField(default=0)
    # The most its subscribers' datasets may store (datasets/quota.py): the NVMe cache they may
    # fill. Separate from the included GB, which are what jobs' NVMe is not billed for: a
    # pay-per-use plan includes none and still stores data.
    dataset_quota_gb = models.PositiveIntegerField(default=0)
    # The longest GPU reservation a subscriber may request; 0: the plan may not reserve.
    max_reservation_minutes = models.PositiveIntegerField(default=0)
    # An interactive session (interactive/) with no kernel activity and its GPUs under 5 % for this
    # long is warned, then stopped (interactive/actions/culling.py).
    session_idle_minutes = models.PositiveIntegerField(default=30, validators=[MinValueValidator(1)])

    class RightSizing(models.TextChoices):
        ADVISE = "advise", "Advise only"
        SHRINK = "shrink", "Shrink automatically, with notice"

    # What the portal does when a user's last jobs on a GPU type all peaked well under the whole GPU
    # they asked for (jobs/right_size.py): offer the share on the job form, or give the next such
    # job the share itself and say so on it (the user may insist on the whole GPU).
    right_sizing = models.CharField(
        max_length=8,
        choices=RightSizing.choices,
        default=RightSizing.ADVISE,
        db_default=RightSizing.ADVISE,  # the release before this column still inserts plans while this one migrates
        help_text="Advise: the job form offers a share of a GPU. Shrink: a user whose last jobs on a GPU type "
        "all used well under a whole GPU's memory gets the share on the next one, with a notice on the job",
    )
    # The code of the rate card its use is priced at (plans/rate_cards.py): the card of that code
    # in force when a run starts. Every card of the code must price each GPU type of the plan
    # (plans.rates.check_plan_prices; the admin refuses a plan or a card that breaks this).
    rate_card = models.CharField(
        max_length=32,
        default="list",
        validators=[SLUG],
        help_text='The rate card its usage is priced at: "list" for most plans, "enterprise" for Enterprise',
    )
    # Offered for new subscriptions; an old plan stays for the subscriptions that name it.
    available = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["monthly_price", "code"]

    def __str__(self):
        return self.name

    def save(self, *args, **kwargs):
        """A new monthly price is billed from the next billing month: the month under way keeps
        the price it started with (PlanPrice). A new plan's price holds from the start. Change
        prices through this method: a QuerySet.update of monthly_price writes no history, and
        billing reads the history."""
        update_fields = kwargs.get("update_fields")
        if update_fields is not None and "monthly_price" not in update_fields:
            return super().save(*args, **kwargs)
        adding = self._state.adding
        with transaction.atomic():
            # Under the row's lock: two admins saving at once see each other's price, so the
            # history always ends at the price the row holds.
            before = (
                None
                if adding
                else Plan.objects.select_for_update().filter(pk=self.pk).values_list("monthly_price", flat=True).first()
            )
            super().save(*args, **kwargs)
            if adding or before is None:
                PlanPrice.objects.get_or_create(
                    plan=self, effective_from=SINCE_THE_START, defaults={"monthly_price": self.monthly_price}
                )
            elif before != self.monthly_price:
                # A plan with no history yet keeps its old price until the change takes effect.
                PlanPrice.objects.get_or_create(
                    plan=self, effective_from=SINCE_THE_START, defaults={"monthly_price": before}
                )
                PlanPrice.objects.update_or_create(
                    plan=self,
                    effective_from=first_of_next_billing_month(),
                    defaults={"monthly_price": self.monthly_price},
                )


# The effective date of a plan's first price: every month it was ever billed.
SINCE_THE_START = date(2000, 1, 1)


def billing_zone() -> ZoneInfo:
    """The zone whose midnights start billing days and months (BILLING_TIME_ZONE, else
    TIME_ZONE); billing.invoices.drafts counts months in it too."""
    return ZoneInfo(getattr(settings, "BILLING_TIME_ZONE", "") or settings.TIME_ZONE)


def billing_month(now: datetime | None = None) -> date:
    """The first day of the billing month under way."""
    local = (now or timezone.now()).astimezone(billing_zone())
    return date(local.year, local.month, 1)


def first_of_next_billing_month(now: datetime | None = None) -> date:
    month = billing_month(now)
    return date(month.year + month.month // 12, month.month % 12 + 1, 1)


class PlanPrice(models.Model):
    """A plan's monthly price from a month on. Invoices charge each month the price in force
    on its first day, so an admin's change never reprices a month already under way."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="prices")
    monthly_price = models.DecimalField(max_digits=10, decimal_places=2, validators=[MinValueValidator(0)])
    effective_from = models.DateField(help_text="The first billing month at this price (its first day)")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["plan", "-effective_from"]
        constraints = [
            models.UniqueConstraint(fields=["plan", "effective_from"], name="one_price_per_plan_and_month"),
            models.CheckConstraint(condition=Q(effective_from__day=1), name="prices_start_on_a_months_first_day"),
        ]

    def __str__(self):
        return f"{self.plan.code} {self.monthly_price} from {self.effective_from:%Y-%m}"


def fee_in_force(period: date, plan_ref: str = "plan"):
    """The monthly price, for the month `period`, of the plan named by OuterRef(plan_ref)
    (`"plan"` on rows that point at a plan, `"pk"` on plans themselves), falling back on the
    plan's list price when it has no history. Every reader of a month's price uses this."""
    history = (
        PlanPrice.objects.filter(plan=models.OuterRef(plan_ref), effective_from__lte=period)
        .order_by("-effective_from")
        .values("monthly_price")[:1]
    )
    list_price = "monthly_price" if plan_ref == "pk" else f"{plan_ref}__monthly_price"
    return Coalesce(models.Subquery(history), models.F(list_price))


class PlanGpuType(models.Model):
    """What a plan gives on one GPU type; a type without a row is not in the plan. Its price per
    GPU-second is on the plan's rate card (`Plan.rate_card`), not here."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="gpu_types")
    gpu_type = models.CharField(max_length=32, validators=[SLUG])
    max_concurrent = models.PositiveSmallIntegerField(help_text="GPUs of this type a user may hold or queue at once")
    included_hours = models.PositiveIntegerField(default=0, help_text="GPU-hours a month included in the price")

    class Meta:
        ordering = ["plan", "gpu_type"]
        constraints = [models.UniqueConstraint(fields=["plan", "gpu_type"], name="one_row_per_plan_and_gpu_type")]

    def __str__(self):
        return f"{self.plan.code}/{self.gpu_type}"


class Subscription(models.Model):
    class Status(models.TextChoices):
        ACTIVE = "active"
        PAUSED = "paused"
        CANCELLED = "cancelled"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="subscriptions")
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="subscriptions")
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.ACTIVE)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            # One current row per user: the database, not the code, keeps two changes at
            # once from leaving two.
            models.UniqueConstraint(
                fields=["user"], condition=Q(ended_at__isnull=True), name="one_current_subscription"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")), name="ends_after_start"
            ),
        ]

    def __str__(self):
        return f"{self.user} {self.plan.code} {self.status} from {self.started_at:%Y-%m-%d}"


class MonthlyUsageReset(models.Model):
    """The month whose start reset the GPU-minute budgets in Slurm (plans.tasks)."""

    month = models.DateField(unique=True)
    associations = models.PositiveIntegerField()
    done_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return f"{self.month:%Y-%m}: {self.associations} reset"
