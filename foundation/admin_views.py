"""The admin's pages of records that are written by the portal's actions only (ledgers,
invoices, plan history, decided allocations): an admin reads them and changes nothing there."""

from django.contrib import admin


class ViewOnlyAdmin(admin.ModelAdmin):
    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
