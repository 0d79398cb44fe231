"""Django admin: burn weights (a change is a new row from a moment on, audited), the ledger
read-only, and adjustments with a reason (written through credits.actions.ledger, audited)."""

import secrets

from django import forms
from django.contrib import admin, messages

from audit.log import record
from credits import actions
from credits.actions import ledger
from credits.models import BurnWeight, Campaign, CreditAccount, LedgerEntry
from foundation.admin_views import ViewOnlyAdmin


@admin.register(BurnWeight)
class BurnWeightAdmin(admin.ModelAdmin):
    list_display = ("gpu_type", "credits_per_gpu_second", "effective_from", "note")
    list_filter = ("gpu_type",)

    def has_change_permission(self, request, obj=None):
        # A weight in force explains past spends: change it by adding a newer row.
        return obj is None

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        record(
            request.user,
            "credits.weight.add",
            f"burn weight {obj.gpu_type}",
            after={
                "credits_per_gpu_second": str(obj.credits_per_gpu_second),
                "effective_from": obj.effective_from.isoformat(),
            },
        )


@admin.register(LedgerEntry)
class LedgerEntryAdmin(ViewOnlyAdmin):
    list_display = ("created_at", "account", "kind", "amount", "grant_kind", "campaign", "idempotency_key")
    list_filter = ("kind", "grant_kind")
    search_fields = ("account__user__username", "idempotency_key", "reference")
    list_select_related = ("account__user", "campaign")


class AdjustmentForm(forms.ModelForm):
    adjust_by = forms.IntegerField(required=False, help_text="Credits to add (positive) or take back (negative)")
    reason = forms.CharField(required=False, max_length=500)
    # Drawn when the form is shown: the adjustment's idempotency key, so the same form sent
    # twice (a double click, a resent POST) adjusts once.
    submission_key = forms.RegexField(regex=r"^[0-9a-f]{32}$", required=False, widget=forms.HiddenInput)

    class Meta:
        model = CreditAccount
        fields = []

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if not self.is_bound:
            self.initial["submission_key"] = secrets.token_hex(16)

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("adjust_by") and not (cleaned.get("reason") or "").strip():
            self.add_error("reason", "An adjustment needs a reason.")
        if cleaned.get("adjust_by") and not cleaned.get("submission_key") and "submission_key" not in self.errors:
            self.add_error(None, "The form is out of date: open it again.")
        return cleaned


@admin.register(CreditAccount)
class CreditAccountAdmin(admin.ModelAdmin):
    form = AdjustmentForm
    list_display = ("user", "group", "balance", "referral_code")
    search_fields = ("user__username", "group__slug")
    readonly_fields = ("user", "group", "balance", "referral_code")

    def has_add_permission(self, request):
        return False

    def has_delete_permission(self, request, obj=None):
        return False

    def save_model(self, request, obj, form, change):
        amount = form.cleaned_data.get("adjust_by")
        if not amount:
            return
        reason = form.cleaned_data["reason"]
        owner = f"group-{obj.group_id}" if obj.group_id else obj.user_id
        key = f"adjustment:{owner}:{form.cleaned_data['submission_key']}"
        try:
            entry, created = actions.adjust(
                obj.user_id, amount, actor=request.user, reason=reason, key=key, group_id=obj.group_id
            )
        except ledger.LedgerError as exc:
            messages.error(request, str(exc))
            return
        if not created:
            messages.warning(request, "This adjustment was already made; it was not made again.")
            return
        record(
            request.user,
            "credits.adjust",
            f"credits of {obj.group or obj.user}",
            after={"amount": amount, "entry": entry.pk},
            reason=reason,
        )


admin.site.register(Campaign)
