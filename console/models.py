from django.conf import settings
from django.db import models


class AuditLog(models.Model):
    """Every admin action on the cluster: who, what, when, and how it ended."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=50)
    target = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict, blank=True)
    succeeded = models.BooleanField(default=False)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor} {self.action} {self.target}"


class DiagnosticRun(models.Model):
    """A "diagnose" request for one GPU: a short Slurm job pinned to that node."""

    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    job = models.ForeignKey("jobs.Job", null=True, on_delete=models.SET_NULL)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"diagnose {self.node}/{self.index}"
