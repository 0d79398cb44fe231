from django.conf import settings
from django.db import models

from billing.plans import PLAN_CHOICES


class Role(models.TextChoices):
    USER = "user", "User"
    ADMIN = "admin", "Admin"
    MARKETING = "marketing", "Marketing"


class Profile(models.Model):
    """A portal user's role, plan and identity on the cluster."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.USER)
    plan = models.CharField(max_length=16, choices=PLAN_CHOICES, default="free")
    # The Unix/Slurm user the portal acts as for this person; set once, never reused.
    cluster_username = models.CharField(max_length=32, unique=True, null=True, blank=True)
    provisioned_at = models.DateTimeField(null=True, blank=True)
    provisioning_error = models.TextField(blank=True)

    def __str__(self):
        return f"{self.user.username} ({self.role}, {self.plan})"

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def is_marketing(self) -> bool:
        return self.role == Role.MARKETING
