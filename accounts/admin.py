from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from accounts.actions import lifecycle
from accounts.models import ClusterAccount, Profile
from plans.catalog import plan_for
from plans.models import Plan, Subscription


class _NamesTheActor:
    """Saves and deletes made here name the admin in the audit log (accounts/receivers.py)."""

    def save_model(self, request, obj, form, change):
        obj._audit_actor = request.user
        super().save_model(request, obj, form, change)

    def delete_model(self, request, obj):
        obj._audit_actor = request.user
        super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        # One by one, so each deletion goes through the signal that locks the cluster account.
        for obj in queryset:
            self.delete_model(request, obj)


class ProfileForm(forms.ModelForm):
    """The profile, and a change of the user's plan (any plan, offered or not) with a reason."""

    change_plan_to = forms.ModelChoiceField(
        Plan.objects.all(), required=False, to_field_name="code", help_text="Leave empty to keep the plan"
    )
    plan_status = forms.ChoiceField(choices=Subscription.Status.choices, initial=Subscription.Status.ACTIVE)
    plan_reason = forms.CharField(required=False, max_length=200, help_text="Recorded in the audit log")

    class Meta:
        model = Profile
        fields = [
            "user",
            "role",
            "cluster_username",
            "cluster_uid",
            "cluster_gid",
            "provisioned_at",
            "provisioning_error",
        ]

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("change_plan_to") and not (cleaned.get("plan_reason") or "").strip():
            self.add_error("plan_reason", "A plan change needs a reason.")
        return cleaned


@admin.register(Profile)
class ProfileAdmin(_NamesTheActor, admin.ModelAdmin):
    form = ProfileForm
    list_display = ("user", "role", "cluster_username", "provisioned_at")
    list_filter = ("role",)
    search_fields = ("user__username", "cluster_username")
    readonly_fields = ("current_plan",)

    @admin.display(description="Plan now")
    def current_plan(self, obj):
        if obj is None or obj.pk is None:
            return "-"
        plan = plan_for(obj.user)
        return f"{plan.name} ({plan.status})"

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        plan = form.cleaned_data.get("change_plan_to")
        if plan is None:
            return
        status = form.cleaned_data["plan_status"]
        started = lifecycle.change_plan(
            obj.user, plan.code, actor=request.user, status=status, reason=form.cleaned_data["plan_reason"].strip()
        )
        if started is None:
            messages.info(request, f"{obj.user} is on {plan.name} ({status}) already.")
        else:
            messages.success(request, f"{obj.user} is now on {plan.name} ({status}).")


admin.site.unregister(get_user_model())


@admin.register(get_user_model())
class PortalUserAdmin(_NamesTheActor, UserAdmin):
    actions = ["deactivate_accounts", "reactivate_accounts"]

    @admin.action(description="Deactivate: cancel their jobs and lock their cluster account")
    def deactivate_accounts(self, request, queryset):
        done = sum(lifecycle.deactivate(user, actor=request.user, reason="admin action") for user in queryset)
        self.message_user(request, f"{done} account(s) deactivated.")

    @admin.action(description="Reactivate and restore their cluster account")
    def reactivate_accounts(self, request, queryset):
        done = sum(lifecycle.reactivate(user, actor=request.user, reason="admin action") for user in queryset)
        self.message_user(request, f"{done} account(s) reactivated.")


@admin.register(ClusterAccount)
class ClusterAccountAdmin(admin.ModelAdmin):
    """Users' accounts on further clusters (docs/clusters.md): read here, made by the portal."""

    list_display = ("profile", "cluster", "uid", "provisioned_at", "error")
    list_filter = ("cluster",)
    search_fields = ("profile__cluster_username", "profile__user__username")
    readonly_fields = ("profile", "cluster", "uid", "gid", "provisioned_at", "error")

    def has_add_permission(self, request):
        return False
