"""Admins edit plans and rate cards here. Every change is audited (before/after). A plan's
change is written into Slurm on commit, so the QOS and associations follow the plan without a
separate step. A rate card in force is read-only (a change of price is a new card with a later
effective date; "New card from these prices" on a card's page starts one), a scheduled card may
be edited or withdrawn until its date comes. Neither a plan nor a card may leave a GPU type of a
plan without a price on the plan's card (docs/billing.md)."""

from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import ValidationError
from django.db import transaction
from django.forms.models import BaseInlineFormSet, model_to_dict
from django.urls import reverse
from django.utils.html import format_html

from audit.log import record
from foundation.admin_views import ViewOnlyAdmin
from plans import actions
from plans.models import (
    MonthlyUsageReset,
    Plan,
    PlanGpuType,
    PlanPrice,
    RateCard,
    RateCardDiscount,
    RateCardGpuPrice,
    RateCardSpotMultiplier,
    Subscription,
    first_of_next_billing_month,
)
from plans.rates import card_state, check_plan_prices, required_gpu_types
from plans.tasks import sync_slurm_limits


def _plan_state(plan: Plan) -> dict:
    fields = model_to_dict(plan, exclude=["id"])
    fields["monthly_price"] = str(fields["monthly_price"])
    fields["gpu_types"] = {
        row.gpu_type: {
            "max_concurrent": row.max_concurrent,
            "included_hours": row.included_hours,
        }
        for row in plan.gpu_types.all()
    }
    return fields


class PlanGpuTypeFormSet(BaseInlineFormSet):
    def clean(self):
        """The plan's card prices every GPU type the plan gives (cards are complete): a plan that
        could not be priced is refused here, naming the card and the types."""
        super().clean()
        if any(self.errors):
            return
        gpu_types = {
            form.cleaned_data["gpu_type"]
            for form in self.forms
            if form.cleaned_data.get("gpu_type") and not form.cleaned_data.get("DELETE")
        }
        check_plan_prices(self.instance.rate_card, gpu_types, plan=self.instance.code)


class PlanGpuTypeInline(admin.TabularInline):
    model = PlanGpuType
    formset = PlanGpuTypeFormSet
    extra = 0


class PlanPriceInline(admin.TabularInline):
    """The price history, read-only: it is written by Plan.save when the price changes."""

    model = PlanPrice
    extra = 0
    fields = ("effective_from", "monthly_price", "created_at")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Plan)
class PlanAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "qos", "priority", "monthly_price", "max_job_minutes", "available")
    inlines = [PlanGpuTypeInline, PlanPriceInline]

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        form.base_fields[
            "monthly_price"
        ].help_text = "A new price is billed from the next billing month on; the month under way keeps its price."
        return form

    def get_readonly_fields(self, request, obj=None):
        # Subscriptions and Slurm's QOS name it: renaming would orphan both.
        return ("code",) if obj is not None else ()

    def save_related(self, request, form, formsets, change):
        super().save_related(request, form, formsets, change)
        plan = form.instance
        before = getattr(plan, "_state_before", {})
        action = "plan.change" if change else "plan.create"
        record(request.user, action, f"plan:{plan.code}", before=before, after=_plan_state(plan))
        transaction.on_commit(sync_slurm_limits.delay)

    def save_model(self, request, obj, form, change):
        if change:
            # Read before the save: save_related runs after the row has changed.
            obj._state_before = _plan_state(Plan.objects.get(pk=obj.pk))
        super().save_model(request, obj, form, change)
        if change and "monthly_price" in form.changed_data:
            messages.info(
                request,
                f"{obj.name}: ${obj.monthly_price} a month is billed from {first_of_next_billing_month():%-d %B %Y}.",
            )


class RateCardGpuPriceFormSet(BaseInlineFormSet):
    def clean(self):
        """A card prices every GPU type of the plans that pay its code (cards are complete,
        docs/billing.md): a card that would leave one of them unpriced is refused here, naming
        the types and the plans, rather than when a run of that type is charged."""
        super().clean()
        if any(self.errors):
            return
        priced = {
            form.cleaned_data["gpu_type"]
            for form in self.forms
            if form.cleaned_data.get("gpu_type") and not form.cleaned_data.get("DELETE")
        }
        needed = required_gpu_types(self.instance.code)
        missing = {gpu_type: plans for gpu_type, plans in needed.items() if gpu_type not in priced}
        if missing:
            raise ValidationError(
                f"A {self.instance.code!r} card must price every GPU type of the plans that pay it; missing: "
                + "; ".join(f"{gpu_type} (plan {', '.join(plans)})" for gpu_type, plans in sorted(missing.items()))
            )


class RateCardGpuPriceInline(admin.TabularInline):
    model = RateCardGpuPrice
    formset = RateCardGpuPriceFormSet
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


class CopiedCardRowsInline(admin.TabularInline):
    """Rows of a card (tiers, spot shares): on a new card made from a card's page ("New card from
    these prices") they start as that card's rows (`copied_fields`); frozen once it is in force."""

    extra = 0
    copied_fields: tuple[str, ...] = ()

    def get_formset(self, request, obj=None, **kwargs):
        formset = super().get_formset(request, obj, **kwargs)
        source = _copied_card(request) if obj is None else None
        if source is not None:
            rows = getattr(source, self.model._meta.get_field("card").remote_field.related_name).all()
            initial = [{name: getattr(row, name) for name in self.copied_fields} for row in rows]
            formset = type(
                formset.__name__, (formset,), {"extra": len(initial), "__init__": _with_initial(formset, initial)}
            )
        return formset

    def has_change_permission(self, request, obj=None):
        return obj is None or not obj.in_force_since()

    has_add_permission = has_delete_permission = has_change_permission


class RateCardDiscountInline(CopiedCardRowsInline):
    """The volume discount tiers: they govern the months that start while the card is in force."""

    model = RateCardDiscount
    copied_fields = ("min_spend", "fraction")


class RateCardSpotMultiplierInline(CopiedCardRowsInline):
    """Spot shares of the GPU prices by time window (plans/spot.py)."""

    model = RateCardSpotMultiplier
    copied_fields = ("gpu_type", "window", "multiplier")


def _copied_card(request) -> RateCard | None:
    source = request.GET.get("from", "")
    if not source.isdigit():
        return None
    return (
        RateCard.objects.filter(pk=int(source)).prefetch_related("gpu_prices", "discounts", "spot_multipliers").first()
    )


def _with_initial(formset_class, initial):
    def __init__(self, *args, **kwargs):
        kwargs.setdefault("initial", initial)
        formset_class.__init__(self, *args, **kwargs)

    return __init__


@admin.register(RateCard)
class RateCardAdmin(admin.ModelAdmin):
    list_display = ("code", "name", "effective_from", "in_force", "created_by", "created_at")
    list_filter = ("code",)
    inlines = [RateCardGpuPriceInline, RateCardDiscountInline, RateCardSpotMultiplierInline]
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
        url = reverse("admin:plans_ratecard_add") + f"?from={obj.pk}"
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
                "(RTX 4090 on both cards, H100 on the list card; the rule is in plans/seed.py): "
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
        actions.withdraw_rate_card(request.user, obj)
        messages.info(request, "The scheduled card was withdrawn; the card in force before it stays in force.")


@admin.register(Subscription)
class SubscriptionAdmin(ViewOnlyAdmin):
    list_display = ("user", "plan", "status", "started_at", "ended_at")
    list_filter = ("plan", "status")
    search_fields = ("user__username",)

    # History is written by accounts.actions.lifecycle.change_plan, never edited.


@admin.register(MonthlyUsageReset)
class MonthlyUsageResetAdmin(admin.ModelAdmin):
    list_display = ("month", "associations", "done_at")
