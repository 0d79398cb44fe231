from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin

from accounts import lifecycle
from accounts.models import Profile


class _NamesTheActor:
    """Saves and deletes made here name the admin in the audit log (accounts/signals.py)."""

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


@admin.register(Profile)
class ProfileAdmin(_NamesTheActor, admin.ModelAdmin):
    list_display = ("user", "role", "cluster_username", "provisioned_at")
    list_filter = ("role",)
    search_fields = ("user__username", "cluster_username")


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
