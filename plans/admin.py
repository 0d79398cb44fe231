"""Admins edit plans here. Every change is audited (before/after) and written into Slurm on
commit, so the QOS and associations follow the plan without a separate step."""

from django.contrib import admin, messages
from django.db import transaction
from django.forms.models import model_to_dict

from audit.log import record
from plans.models import MonthlyUsageReset, Plan, PlanGpuType, PlanPrice, Subscription, first_of_next_billing_month
from plans.tasks import sync_slurm_limits


def _plan_state(plan: Plan) -> dict:
    fields = model_to_dict(plan, exclude=["id"])
    fields["monthly_price"] = str(fields["monthly_price"])
    fields["gpu_types"] = {
        row.gpu_type: {
            "max_concurrent": row.max_concurrent,
            "included_hours": row.included_hours,
            "rate_per_second": None if row.rate_per_second is None else str(row.rate_per_second),
        }
        for row in plan.gpu_types.all()
    }
    return fields


class PlanGpuTypeInline(admin.TabularInline):
    model = PlanGpuType
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


@admin.register(Subscription)
class SubscriptionAdmin(admin.ModelAdmin):
    list_display = ("user", "plan", "status", "started_at", "ended_at")
    list_filter = ("plan", "status")
    search_fields = ("user__username",)

    # History is written by accounts.lifecycle.change_plan, never edited.
    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(MonthlyUsageReset)
class MonthlyUsageResetAdmin(admin.ModelAdmin):
    list_display = ("month", "associations", "done_at")
