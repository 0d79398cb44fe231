"""Admins edit rate cards here. A card in force is read-only (a change of price is a new card
with a later effective date; "New card from these prices" on a card's page starts one), a
scheduled card may be edited or withdrawn until its date comes, and every change is audited
with before/after."""

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.urls import reverse
from django.utils.html import format_html

from audit.log import record
from billing.actions import approve_credit_limit
from billing.models import CreditLimit, Invoice, InvoiceLine, RateCard, RateCardGpuPrice
from billing.rates import card_state


class RateCardGpuPriceInline(admin.TabularInline):
    model = RateCardGpuPrice
    extra = 0

    def get_extra(self, request, obj=None, **kwargs):
        # A new card starts with a row for each GPU type of the pool.
        return len(settings.GPU_TYPES) if obj is None else 0

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        field = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "gpu_type":
            field.help_text = "One of: " + ", ".join(settings.GPU_TYPES)
        return field

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        source = _copied_card(request) if obj is None else None
        if source is not None:
            # A new card from a card's page ("New card from these prices"): its prices to edit.
            initial = [
                {"gpu_type": row.gpu_type, "price_per_gpu_second": row.price_per_gpu_second}
                for row in source.gpu_prices.all()
            ]
            formset = type(
                formset.__name__, (formset,), {"extra": len(initial), "__init__": _with_initial(formset, initial)}
            )
        return formset

    def has_change_permission(self, request, obj=None):
        return obj is None or not obj.in_force_since()

    has_add_permission = has_delete_permission = has_change_permission


def _copied_card(request) -> RateCard | None:
    source = request.GET.get("from", "")
    return RateCard.objects.filter(pk=int(source)).prefetch_related("gpu_prices").first() if source.isdigit() else None


def _with_initial(formset_class, initial):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", initial)
        formset_class.__init__(self, *args, **kwargs)

    return __init__


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "effective_from", "in_force", "created_by", "created_at")
    list_filter = ("code",)
    inlines = [RateCardGpuPriceInline]
    fields = (
        "code",
        "name",
        "effective_from",
        "gpu_memory_price_per_gb_second",
        "nvme_price_per_gb_hour",
        "note",
        "created_by",
        "created_at",
        "new_card",
    )
    readonly_fields = ("created_by", "created_at", "new_card")

    @admin.display(boolean=True, description="in force (or was)")
    def in_force(self, obj):
        return obj.in_force_since()

    @admin.display(description="change of price")
    def new_card(self, obj):
        if obj is None or obj.pk is None:
            return "-"
        url = reverse("admin:billing_ratecard_add") + f"?from={obj.pk}"
        return format_html('<a href="{}">New card from these prices</a> (with a later effective date)', url)

    def get_changeform_initial_data(self, request):
        initial = super().get_changeform_initial_data(request)
        source = _copied_card(request)
        if source is not None:
            initial.update(
                code=source.code,
                name=source.name,
                gpu_memory_price_per_gb_second=source.gpu_memory_price_per_gb_second,
                nvme_price_per_gb_hour=source.nvme_price_per_gb_hour,
                note=f"From {source}: ",
            )
        initial.pop("from", None)
        return initial

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)
        if "note" in form.base_fields:
            form.base_fields["note"].help_text = (
                "Why these prices. The seeded cards carry placeholders where docs/product.md names no price "
                "(RTX 4090 on both cards, H100 on the list card; the rule is in billing/seed.py): "
                "replace them with a new card (Save as new, with a later effective date)."
            )
        return form

    def has_change_permission(self, request, obj=None):
        # Viewing stays possible (the view permission); a card in force cannot be saved.
        if obj is not None and obj.in_force_since():
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        if obj is not None and obj.in_force_since():
            return False
        return super().has_delete_permission(request, obj)

    def get_actions(self, request):
        # The bulk delete would bypass the per-card check; a scheduled card is withdrawn from its page.
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)
        return actions

    def save_model(self, request, obj, form, change):
        if change:
            # Read before the save: save_related runs after the row has changed.
            obj._state_before = card_state(RateCard.objects.get(pk=obj.pk))
        else:
            obj.created_by = request.user
        super().save_model(request, obj, form, change)

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        card = form.instance
        action = "rate_card.change" if change else "rate_card.create"
        record(
            request.user,
            action,
            f"rate_card:{card.code}@{card.effective_from.isoformat()}",
            before=getattr(card, "_state_before", {}),
            after=card_state(card),
        )

    def delete_model(self, request, obj):
        before = card_state(obj)
        with transaction.atomic():
            super().delete_model(request, obj)
            record(
                request.user,
                "rate_card.delete",
                f"rate_card:{obj.code}@{obj.effective_from.isoformat()}",
                before=before,
            )
        messages.info(request, "The scheduled card was withdrawn; the card in force before it stays in force.")


class InvoiceLineInline(admin.TabularInline):
    model = InvoiceLine
    extra = 0
    fields = ("position", "kind", "plan", "gpu_type", "description", "quantity", "unit", "unit_price", "amount")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Invoice)
class InvoiceAdmin(admin.ModelAdmin):
    """Read-only: invoices change only through billing.invoicing and billing.payments (issue,
    void, payments: on the admins' Billing pages, audited)."""

    list_display = ("__str__", "user", "period", "status", "total", "issued_at", "paid_at")
    list_filter = ("status", "period")
    search_fields = ("number", "user__username")
    inlines = [InvoiceLineInline]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Invoice._meta.fields]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(CreditLimit)
class CreditLimitAdmin(admin.ModelAdmin):
    """What a pay-afterwards account may owe (billing/credit_limits.py). Saving approves it in
    the admin's name, audited; the user's own limit is never approved by themselves."""

    list_display = ("user", "amount", "approved_by", "approved_at", "reason")
    search_fields = ("user__username", "user__email")
    fields = ("user", "amount", "reason", "approved_by", "approved_at")
    readonly_fields = ("approved_by", "approved_at")
    raw_id_fields = ("user",)

    def save_model(self, request, obj, form, change):
        if obj.user_id == request.user.pk:
            raise PermissionDenied("an admin does not approve their own credit limit")
        approve_credit_limit(obj.user, obj.amount, actor=request.user, reason=obj.reason)
