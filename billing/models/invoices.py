"""Invoices: one per payer and month, draft -> issued -> paid, or void.

The payer is a user (their own jobs, and group jobs of a group that holds no plan) or a group
that holds a plan (groups.GroupPlan): its invoice has lines per member and GPU type.

- A draft gathers the month's usage records as they are charged (`UsageRecord.invoice`); its
  lines are rebuilt from them until it is issued. The draft's row is the lock that orders the
  charging of one user's month: charging and closing both take it (`select_for_update`).
- Issuing freezes the lines, the totals and a number. Numbers come from `InvoiceNumber`, one
  counter row per year taken under a row lock in the issuing transaction, so they have no gaps
  (a void invoice keeps its number and stays on record).
- An issued, paid or void invoice never changes its lines or amounts; only the status moves
  forward (issued -> paid, issued -> void).
- Usage that reaches slurmdbd after its month was issued goes on the next open month's draft.
"""

from __future__ import annotations

from decimal import Decimal

from django.conf import settings
from django.db import models
from django.db.models import Q

# Invoice amounts: cents (lines are rounded half-up to the cent; pricing.to_cents).
CENTS = {"max_digits": 14, "decimal_places": 2, "default": Decimal(0)}

# What may still change on an invoice once it is issued: its status moving forward and the
# facts of that move. Everything else (lines, amounts, number, period, owner) is frozen.
MUTABLE_ONCE_ISSUED = frozenset({"status", "paid_at", "voided_at", "void_reason"})


class InvoiceFrozen(Exception):
    """A change to an issued, paid or void invoice (or its lines) other than its status."""


class InvoiceQuerySet(models.QuerySet):
    def update(self, **kwargs):
        frozen = set(kwargs) - MUTABLE_ONCE_ISSUED
        if not frozen:
            # Status moves are conditional UPDATEs by their callers (filter on the status read).
            return super().update(**kwargs)
        if self.exclude(status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen(f"an issued invoice never changes {', '.join(sorted(frozen))}")
        # The WHERE keeps it to drafts even if one is issued between the check and the UPDATE.
        return super(InvoiceQuerySet, self.filter(status=Invoice.Status.DRAFT)).update(**kwargs)

    def delete(self):
        if self.exclude(status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen("an issued invoice is never deleted (void it instead)")
        return super().delete()


class Invoice(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        ISSUED = "issued"
        PAID = "paid"
        VOID = "void"

    # Exactly one of the two is the payer.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="invoices"
    )
    group = models.ForeignKey("groups.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="invoices")
    period = models.DateField(help_text="The first day of the month billed")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.DRAFT)
    number = models.CharField(max_length=32, null=True, blank=True, unique=True)
    currency = models.CharField(max_length=3, default="USD")
    subtotal = models.DecimalField(**CENTS)
    discount = models.DecimalField(**CENTS, help_text="Volume discount, 0 or less")
    credits = models.DecimalField(**CENTS, help_text="Credits applied, 0 or less")
    total = models.DecimalField(**CENTS)
    created_at = models.DateTimeField(auto_now_add=True)
    refreshed_at = models.DateTimeField(null=True, blank=True, help_text="When a draft's lines were last rebuilt")
    issued_at = models.DateTimeField(null=True, blank=True)
    paid_at = models.DateTimeField(null=True, blank=True)
    voided_at = models.DateTimeField(null=True, blank=True)
    void_reason = models.CharField(max_length=200, blank=True)
    # A draft made when an issued invoice of the same month was voided: it takes that
    # invoice's usage (billing.actions.invoicing.void_invoice) and waits for an admin to issue it.
    replaces = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="replaced_by")

    objects = InvoiceQuerySet.as_manager()

    class Meta:
        ordering = ["-period", "-id"]
        constraints = [
            # One live invoice per user and month; a void one may be replaced.
            models.UniqueConstraint(
                fields=["user", "period"], condition=~Q(status="void"), name="one_live_invoice_per_user_and_month"
            ),
            models.UniqueConstraint(
                fields=["group", "period"], condition=~Q(status="void"), name="one_live_invoice_per_group_and_month"
            ),
            models.CheckConstraint(
                condition=Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False),
                name="invoice_has_one_payer",
            ),
            models.CheckConstraint(
                condition=Q(status="draft", number__isnull=True) | (~Q(status="draft") & Q(number__isnull=False)),
                name="numbered_once_issued",
            ),
        ]
        indexes = [models.Index(fields=["status", "period"])]

    def __str__(self):
        return self.number or f"draft {self.payer_name} {self.period:%Y-%m}"

    def save(self, *args, **kwargs):
        stored = Invoice.objects.filter(pk=self.pk).first() if self.pk is not None else None
        if stored is not None and stored.status != self.Status.DRAFT:
            changed = [
                field.attname
                for field in self._meta.concrete_fields
                if field.attname not in MUTABLE_ONCE_ISSUED
                and getattr(stored, field.attname) != getattr(self, field.attname)
            ]
            if changed:
                raise InvoiceFrozen(f"{stored} is {stored.status}: {', '.join(changed)} no longer change")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        stored = Invoice.objects.filter(pk=self.pk).first() if self.pk is not None else None
        if stored is not None and stored.status != self.Status.DRAFT:
            raise InvoiceFrozen(f"{stored} is {stored.status} and is never deleted (void it instead)")
        return super().delete(*args, **kwargs)

    @property
    def payer_name(self) -> str:
        return str(self.group if self.group_id else self.user)

    @property
    def is_draft(self) -> bool:
        return self.status == self.Status.DRAFT


class InvoiceLineQuerySet(models.QuerySet):
    """Lines are written by billing.actions.invoicing while their invoice is a draft, never after."""

    def _refuse_issued(self):
        if self.exclude(invoice__status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen("the lines of an issued invoice never change")

    def update(self, **kwargs):
        self._refuse_issued()
        return super(InvoiceLineQuerySet, self.filter(invoice__status=Invoice.Status.DRAFT)).update(**kwargs)

    def delete(self):
        self._refuse_issued()
        return super().delete()

    def bulk_create(self, objs, *args, **kwargs):
        objs = list(objs)
        invoice_ids = {line.invoice_id for line in objs}
        if Invoice.objects.filter(pk__in=invoice_ids).exclude(status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen("lines are added to drafts only")
        return super().bulk_create(objs, *args, **kwargs)


class InvoiceLine(models.Model):
    class Kind(models.TextChoices):
        PLAN_FEE = "plan_fee", "plan fee"
        GPU = "gpu", "GPU time"
        GPU_MEMORY = "gpu_memory", "GPU memory"
        NVME = "nvme", "NVMe cache"
        OVERAGE = "overage", "overage beyond the plan"
        INCLUDED = "included", "included in the plan"
        DISCOUNT = "discount", "volume discount"
        CREDITS = "credits", "credits applied"
        NOTE = "note", "note"

    invoice = models.ForeignKey(Invoice, on_delete=models.CASCADE, related_name="lines")
    position = models.PositiveIntegerField()
    kind = models.CharField(max_length=16, choices=Kind.choices)
    gpu_type = models.CharField(max_length=32, blank=True)
    # The plan the line bills for (the fee's plan; the plan usage was charged under): revenue by plan.
    plan = models.CharField(max_length=32, blank=True)
    description = models.CharField(max_length=200)
    quantity = models.DecimalField(max_digits=24, decimal_places=12, default=Decimal(0))
    unit = models.CharField(max_length=16, blank=True)  # "GPU-s", "GB-s", "GB-h", "month", "day"
    unit_price = models.DecimalField(max_digits=14, decimal_places=8, default=Decimal(0))
    amount = models.DecimalField(**CENTS, help_text="Rounded half-up to the cent")
    # Credits ledger entries a "credits" line stands for (ids: the seam for the credits issue).
    credit_entry_ids = models.JSONField(default=list, blank=True)
    # On a group's invoice: the member whose runs the line bills (lines per member and GPU type).
    member = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )

    objects = InvoiceLineQuerySet.as_manager()

    class Meta:
        ordering = ["invoice", "position"]
        constraints = [models.UniqueConstraint(fields=["invoice", "position"], name="one_line_per_position")]

    def __str__(self):
        return f"{self.invoice_id} #{self.position} {self.kind} {self.amount}"

    def save(self, *args, **kwargs):
        if Invoice.objects.filter(pk=self.invoice_id).exclude(status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen("the lines of an issued invoice never change")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        if Invoice.objects.filter(pk=self.invoice_id).exclude(status=Invoice.Status.DRAFT).exists():
            raise InvoiceFrozen("the lines of an issued invoice never change")
        return super().delete(*args, **kwargs)


class InvoiceNumber(models.Model):
    """The gapless counter: one row per year, incremented under a row lock when an invoice is
    issued, in the same transaction ("GP-2026-000001")."""

    year = models.PositiveSmallIntegerField(unique=True)
    last = models.PositiveIntegerField(default=0)

    def __str__(self):
        return f"{self.year}: {self.last}"


class Payment(models.Model):
    """A payment against an issued invoice. Payments are an interface (billing.actions.payments); the
    one implementation here is manual: an admin records money received."""

    invoice = models.ForeignKey(Invoice, on_delete=models.PROTECT, related_name="payments")
    amount = models.DecimalField(max_digits=14, decimal_places=2)
    method = models.CharField(max_length=32, default="manual")
    reference = models.CharField(max_length=128, blank=True)
    # One payment per key: a double submit of the form records it once.
    idempotency_key = models.CharField(max_length=128, unique=True)
    recorded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    received_at = models.DateTimeField()
    recorded_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-received_at", "-id"]
        constraints = [models.CheckConstraint(condition=Q(amount__gt=0), name="payment_is_positive")]

    def __str__(self):
        return f"{self.amount} on {self.invoice}"
