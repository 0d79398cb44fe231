"""Invoices (read-only) and credit limits. Rate cards, the prices, are edited with the plans
(plans/admin.py)."""

from django.contrib import admin
from django.core.exceptions import PermissionDenied

from billing.actions import approve_credit_limit
from billing.models import CreditLimit, Invoice, InvoiceLine
from foundation.admin_views import ViewOnlyAdmin


class InvoiceLineInline(admin.TabularInline):
    model = InvoiceLine
    extra = 0
    fields = ("position", "kind", "plan", "gpu_type", "description", "quantity", "unit", "unit_price", "amount")
    readonly_fields = fields
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Invoice)
class InvoiceAdmin(ViewOnlyAdmin):
    """Read-only: invoices change only through billing.actions.invoicing and billing.actions.payments (issue,
    void, payments: on the admins' Billing pages, audited)."""

    list_display = ("__str__", "user", "period", "status", "total", "issued_at", "paid_at")
    list_filter = ("status", "period")
    search_fields = ("number", "user__username")
    inlines = [InvoiceLineInline]

    def get_readonly_fields(self, request, obj=None):
        return [field.name for field in Invoice._meta.fields]


@admin.register(CreditLimit)
class CreditLimitAdmin(admin.ModelAdmin):
    """What a pay-afterwards account may owe (billing/actions/credit_limits.py). Saving approves it in
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
