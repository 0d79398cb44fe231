import hashlib
import secrets

from django.conf import settings
from django.db import models, transaction


class Role(models.TextChoices):
    USER = "user", "User"
    ADMIN = "admin", "Admin"
    MARKETING = "marketing", "Marketing"


class Profile(models.Model):
    """A portal user's role and identity on the cluster (the plan is a subscription:
    plans.catalog.plan_for)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="profile")
    role = models.CharField(max_length=16, choices=Role.choices, default=Role.USER)
    # The Unix/Slurm user the portal acts as for this person; set once, never reused.
    cluster_username = models.CharField(max_length=32, unique=True, null=True, blank=True)
    cluster_uid = models.IntegerField(null=True, blank=True)
    cluster_gid = models.IntegerField(null=True, blank=True)
    provisioned_at = models.DateTimeField(null=True, blank=True)
    provisioning_error = models.TextField(blank=True)

    def __str__(self):
        return f"{self.user.username} ({self.role})"

    # The role as read from the database, so a save can tell that it changed
    # (accounts/receivers.py re-provisions the association then).
    loaded_terms: dict | None = None

    @classmethod
    def from_db(cls, db, field_names, values):
        instance = super().from_db(db, field_names, values)
        if "role" in field_names:
            instance.loaded_terms = instance.current_terms()
        return instance

    def current_terms(self) -> dict:
        return {"role": self.role}

    @property
    def is_admin(self) -> bool:
        return self.role == Role.ADMIN

    @property
    def is_marketing(self) -> bool:
        return self.role == Role.MARKETING


class ClusterAccount(models.Model):
    """A user's identity on a further cluster (cluster/clusters/registry.py): the same cluster user name
    as on the portal's own (Profile.cluster_username), with that cluster's own uid and gid (its
    job directories and logs are checked against them). Made when the user's first job goes
    there (accounts.actions.provision_on_cluster)."""

    profile = models.ForeignKey(Profile, on_delete=models.CASCADE, related_name="cluster_accounts")
    cluster = models.CharField(max_length=32)
    uid = models.IntegerField(null=True, blank=True)
    gid = models.IntegerField(null=True, blank=True)
    provisioned_at = models.DateTimeField(null=True, blank=True)
    # Command output for admins; the user hears that it failed.
    error = models.TextField(blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["profile", "cluster"], name="one_account_per_cluster")]

    def __str__(self):
        return f"{self.profile.cluster_username}@{self.cluster}"


class TooManyTokens(Exception):
    pass


class ApiToken(models.Model):
    """A bearer token for the REST API. Only its SHA-256 is stored; the token is shown once."""

    PREFIX = "gpt_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=64)
    key_hash = models.CharField(max_length=64, unique=True)
    # The first characters, so a user can tell their tokens apart.
    hint = models.CharField(max_length=12)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.hint}...)"

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, user, name: str) -> tuple["ApiToken", str]:
        """A new token; TooManyTokens past MAX_API_TOKENS_PER_USER (counted under the
        profile's row lock, so two requests at once cannot both take the last place)."""
        key = cls.PREFIX + secrets.token_urlsafe(32)
        with transaction.atomic():
            Profile.objects.select_for_update().filter(user=user).first()
            if cls.objects.filter(user=user).count() >= settings.MAX_API_TOKENS_PER_USER:
                raise TooManyTokens(
                    f"You have {settings.MAX_API_TOKENS_PER_USER} tokens, the most allowed; revoke one first."
                )
            token = cls.objects.create(user=user, name=name, key_hash=cls.hash_key(key), hint=key[:12])
        return token, key
