"""One audit log for every consequential action: admins' cluster actions, account changes,
and (later) approvals, grants and invoices. Rows are written once and never changed."""

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditLogQuerySet(models.QuerySet):
    def update(self, **kwargs):
        raise TypeError("the audit log is append-only")

    def delete(self):
        raise TypeError("the audit log is append-only")


class AuditLog(models.Model):
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="audit_entries"
    )
    # Kept as text too: the entry must still say who acted after that account is deleted.
    actor_name = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=50)
    target = models.CharField(max_length=200)
    parameters = models.JSONField(default=dict, blank=True)
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    reason = models.TextField(blank=True)
    succeeded = models.BooleanField(default=True)
    result = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = AuditLogQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["action", "-created_at"]), models.Index(fields=["target", "-created_at"])]

    def __str__(self):
        return f"{self.created_at:%Y-%m-%d %H:%M} {self.actor_name or 'system'} {self.action} {self.target}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise TypeError("the audit log is append-only")
        if self.actor is not None and not self.actor_name:
            self.actor_name = self.actor.get_username()
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise TypeError("the audit log is append-only")
