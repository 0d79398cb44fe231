from django.contrib import admin

from jobs.models import Job


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ("slurm_job_id", "owner", "cluster_user", "name", "state", "nodes", "created_at")
    list_filter = ("state",)
    search_fields = ("slurm_job_id", "cluster_user", "name", "uuid")
