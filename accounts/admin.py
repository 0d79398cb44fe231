from django.contrib import admin

from accounts.models import Profile


@admin.register(Profile)
class ProfileAdmin(admin.ModelAdmin):
    list_display = ("user", "role", "plan", "cluster_username", "provisioned_at")
    list_filter = ("role", "plan")
    search_fields = ("user__username", "cluster_username")
