"""Admins see groups here and tie a group to a value of the institution's groups claim
(claim_value); shares, members and allocations change through the group's page and the
allocation queue (groups.actions: audited, written to Slurm)."""

from django.contrib import admin

from audit.log import record
from foundation.admin_views import ViewOnlyAdmin
from groups.models import Allocation, Group


@admin.register(Group)
class GroupAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "organization", "shares", "claim_value", "slurm_state", "closed_at")
    search_fields = ("name", "slug", "claim_value")
    fields = ("name", "slug", "organization", "shares", "claim_value", "slurm_state", "slurm_error", "closed_at")
    readonly_fields = ("slug", "organization", "shares", "slurm_state", "slurm_error", "closed_at")

    def has_add_permission(self, request):
        return False  # groups are made through groups.actions (their PI, their Slurm account)

    def save_model(self, request, obj, form, change):
        before = Group.objects.filter(pk=obj.pk).values("name", "claim_value").first() or {}
        super().save_model(request, obj, form, change)
        record(request.user, "group.admin_edit", f"group:{obj.slug}", before=before,
               after={"name": obj.name, "claim_value": obj.claim_value})  # fmt: skip

    def has_delete_permission(self, request, obj=None):
        return False  # closed, never deleted: bills and jobs name them


@admin.register(Allocation)
class AllocationAdmin(ViewOnlyAdmin):
    # Decided on the allocation queue (groups.actions.decide_allocation), never here.
    list_display = ("group", "gpu_type", "gpu_hours", "approved_gpu_hours", "starts_on", "ends_on", "state")
    list_filter = ("state", "gpu_type")
