"""The plan catalogue and each user's subscription history (PRODUCT.md, "Plans").

Plans are rows an admin edits; a user's plan is the newest of their subscription rows,
never a string overwritten in place: a change of plan or a pause ends the current row and
starts a new one. Read plans through `plans.catalog.plan_for(user)`, which returns a frozen
snapshot; Slurm gets the same limits from it (accounts/actions.py, `manage.py slurm_limits`).
"""

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

SLUG = RegexValidator(r"^[a-z][a-z0-9_-]{0,31}\Z", "lower-case letters, digits, - and _ (at most 32)")


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
    # The longest GPU reservation a subscriber may request; 0: the plan may not reserve.
    max_reservation_minutes = models.PositiveIntegerField(default=0)
    # Offered for new subscriptions; an old plan stays for the subscriptions that name it.
    available = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["monthly_price", "code"]

    def __str__(self):
        return self.name


class PlanGpuType(models.Model):
    """What a plan gives on one GPU type; a type without a row is not in the plan."""

    plan = models.ForeignKey(Plan, on_delete=models.CASCADE, related_name="gpu_types")
    gpu_type = models.CharField(max_length=32, validators=[SLUG])
    max_concurrent = models.PositiveSmallIntegerField(help_text="GPUs of this type a user may hold or queue at once")
    included_hours = models.PositiveIntegerField(default=0, help_text="GPU-hours a month included in the price")
    # Pay-as-you-go price per GPU-second (USD); null: not billed per second on this plan.
    rate_per_second = models.DecimalField(
        max_digits=12, decimal_places=6, null=True, blank=True, validators=[MinValueValidator(0)]
    )

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
