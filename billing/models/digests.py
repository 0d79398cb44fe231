from django.conf import settings
from django.db import models


class DigestSent(models.Model):
    """A weekly efficiency digest that went (billing/digests.py): once per recipient and key."""

    key = models.CharField(max_length=64)  # "user:2026-W49" or "group:<id>:2026-W49"
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    sent_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["key", "user"], name="one_digest_per_key_and_user")]

    def __str__(self):
        return f"{self.key} to {self.user_id}"
