"""Research groups and teams: a group is a Slurm account (docs/groups.md).

A group has a PI (its owner), managers and members. Its Slurm account sits under its
organisation's account, under the pool's root; its members are associations there; jobs
charged to the group run with its `--account`, so fair-share and the group's limits bind in
Slurm itself, for a member's own `sbatch` too.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.core.validators import MinValueValidator, RegexValidator
from django.db import models
from django.db.models import Q

from groups.validators import validate_group_name

SLUG = RegexValidator(r"^[a-z][a-z0-9-]{1,29}$", "2-30 characters: a-z, 0-9 and -, starting with a letter.")


class GroupRole(models.TextChoices):
    """What a member may do. The PI may do everything; a manager all but hand the group over;
    a member spends (runs jobs charged to the group) and sees their own share."""

    PI = "pi", "PI / owner"
    MANAGER = "manager", "Manager"
    MEMBER = "member", "Member"


MANAGING_ROLES = (GroupRole.PI, GroupRole.MANAGER)


class Group(models.Model):
    class SlurmState(models.TextChoices):
        PENDING = "pending"  # not written to Slurm yet (or a change waits)
        SYNCED = "synced"
        ERROR = "error"  # the last attempt failed: `slurm_error` says why; retried

    # Rows older than the name rule may be longer than it allows (up to 80): the column keeps them.
    name = models.CharField(max_length=80, validators=[validate_group_name])
    slug = models.SlugField(max_length=30, unique=True, validators=[SLUG])
    organization = models.SlugField(
        max_length=30, validators=[SLUG], help_text="The parent account in Slurm (the institution or company)"
    )
    # Shares of the pool (Slurm's Fairshare); set by admins, never by the group itself.
    shares = models.PositiveIntegerField(default=1, validators=[MinValueValidator(1)])
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    slurm_state = models.CharField(max_length=16, choices=SlurmState.choices, default=SlurmState.PENDING)
    slurm_error = models.TextField(blank=True)
    synced_at = models.DateTimeField(null=True, blank=True)
    # Counts the changes Slurm must learn (groups.actions.slurm_must_learn): a sync marks the group
    # synced only if no change came after the one it read, so a job never goes out on a group
    # whose newest allocation or members Slurm does not hold yet (groups.queries.require_in_slurm).
    slurm_version = models.PositiveIntegerField(default=0)
    # Set when the group is closed: its account is removed from Slurm; the row stays for bills.
    closed_at = models.DateTimeField(null=True, blank=True)
    # The value of the institution's groups claim (OIDC_GROUPS_CLAIM) that makes a person a
    # member at sign-in; set by an admin, never by the group ("" : no claim names this group).
    claim_value = models.CharField(max_length=200, blank=True, db_index=True)

    class Meta:
        ordering = ["name", "id"]

    def __str__(self):
        return self.name

    @property
    def slurm_account(self) -> str:
        return f"{settings.GROUP_ACCOUNT_PREFIX}{self.slug}"

    @property
    def parent_account(self) -> str:
        return f"{settings.ORGANIZATION_ACCOUNT_PREFIX}{self.organization}"


class MembershipQuerySet(models.QuerySet):
    def active(self):
        return self.filter(left_at__isnull=True)


class Membership(models.Model):
    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="memberships")
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="group_memberships")
    role = models.CharField(max_length=16, choices=GroupRole.choices, default=GroupRole.MEMBER)
    joined_at = models.DateTimeField(auto_now_add=True)
    # Leaving or removal ends the membership; the row stays (who was in the group when).
    left_at = models.DateTimeField(null=True, blank=True)
    # The group the member's jobs are charged to when they name none (one per user at most).
    is_default = models.BooleanField(default=False)
    # Made by the institution's groups claim at sign-in (and ended by it); not by an invitation.
    via_claim = models.BooleanField(default=False)

    class EndReason(models.TextChoices):
        LEFT = "left"
        REMOVED = "removed"
        CLAIM = "claim"  # the institution's claim stopped naming the group
        CLOSED = "closed"

    end_reason = models.CharField(max_length=16, choices=EndReason.choices, blank=True)

    objects = MembershipQuerySet.as_manager()

    class Meta:
        ordering = ["group", "joined_at", "id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "user"], condition=Q(left_at__isnull=True), name="one_active_membership_per_user"
            ),
            models.UniqueConstraint(
                fields=["user"], condition=Q(left_at__isnull=True, is_default=True), name="one_default_group_per_user"
            ),
        ]

    def __str__(self):
        return f"{self.user} in {self.group} ({self.role})"

    @property
    def may_manage(self) -> bool:
        return self.role in MANAGING_ROLES


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


class Invitation(models.Model):
    """An invitation by e-mail. Only the token's hash is kept; the e-mail carries the token.
    It is accepted by a signed-in user whose verified address is the invited one."""

    class State(models.TextChoices):
        OPEN = "open"
        ACCEPTED = "accepted"
        REVOKED = "revoked"

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=16, choices=GroupRole.choices, default=GroupRole.MEMBER)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group", "email"], condition=Q(state="open"), name="one_open_invitation_per_address"
            )
        ]

    def __str__(self):
        return f"{self.email} to {self.group}"

    @staticmethod
    def new_token() -> tuple[str, str]:
        token = secrets.token_urlsafe(32)
        return token, hash_token(token)


class Allocation(models.Model):
    """GPU-hours of one GPU type for a period (a quarter, a semester), asked by a group and
    decided by an admin. An approved allocation in force is written into Slurm as the
    group account's GrpTRESMins, so Slurm holds a job that would run past it."""

    class State(models.TextChoices):
        REQUESTED = "requested"
        APPROVED = "approved"
        REFUSED = "refused"
        WITHDRAWN = "withdrawn"

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="allocations")
    gpu_type = models.CharField(max_length=32)
    gpu_hours = models.PositiveIntegerField(validators=[MinValueValidator(1)], help_text="What the group asked for")
    starts_on = models.DateField()
    ends_on = models.DateField(help_text="The first day it no longer applies")
    justification = models.TextField(max_length=4000)
    state = models.CharField(max_length=16, choices=State.choices, default=State.REQUESTED)
    requested_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    requested_at = models.DateTimeField(auto_now_add=True)
    # What the admin approved (may differ from what was asked), who and why.
    approved_gpu_hours = models.PositiveIntegerField(null=True, blank=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, null=True, blank=True, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.CharField(max_length=500, blank=True)
    # Usage against it, as Slurm's accounting says (refreshed by every sync of the group).
    used_gpu_minutes = models.PositiveIntegerField(default=0)
    usage_read_at = models.DateTimeField(null=True, blank=True)
    # When the group's managers were told it is nearly used up (ALLOCATION_WARN_PERCENT), once.
    warned_at = models.DateTimeField(null=True, blank=True)
    # A renewal names the allocation it follows, so the history of a group's time reads as a chain.
    renews = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="renewals")

    class Meta:
        ordering = ["-starts_on", "-id"]
        constraints = [
            models.CheckConstraint(condition=Q(ends_on__gt=models.F("starts_on")), name="allocation_ends_after_start"),
        ]

    def __str__(self):
        return f"{self.group} {self.gpu_type} {self.gpu_hours} h {self.starts_on}..{self.ends_on}"

    @property
    def used_percent(self) -> int | None:
        if not self.approved_gpu_hours:
            return None
        return int(self.used_gpu_minutes * 100 // (self.approved_gpu_hours * 60))


class GroupPlan(models.Model):
    """The plan a group pays its members' group jobs under, one row per period it held it
    (append-only history, like plans.Subscription). While a group holds a plan, runs charged to
    the group (its Slurm account) go on the group's own invoice, priced by that plan, covered by
    the plan's included hours (shared by the members) and the group's credit pool. A run is
    priced by what the group held when the run started, so a change never reprices a run.
    Without a current row the members pay for their group jobs under their own plans.
    Set by admins (groups.actions.set_group_plan): the plan is a contract with the pool."""

    group = models.ForeignKey(Group, on_delete=models.CASCADE, related_name="plans_held")
    plan = models.ForeignKey("plans.Plan", on_delete=models.PROTECT, related_name="+")
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    set_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")

    class Meta:
        ordering = ["-started_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["group"], condition=Q(ended_at__isnull=True), name="one_current_plan_per_group"
            ),
            models.CheckConstraint(
                condition=Q(ended_at__isnull=True) | Q(ended_at__gte=models.F("started_at")),
                name="group_plan_ends_after_start",
            ),
        ]

    def __str__(self):
        return f"{self.group} pays {self.plan_id} from {self.started_at:%Y-%m-%d}"

    @property
    def status(self) -> str:
        # The invoice's day stretches read a subscription's status; a group's plan is never paused.
        return "active"


class GroupBudget(models.Model):
    """A group's monthly budget for what its group jobs cost it (the group's invoice, not the
    members' own): e-mail to the PI and managers at 80 % and 100 %, each once a month, and,
    when asked, new group jobs held once it is spent. Set by the PI or a manager."""

    group = models.OneToOneField(Group, on_delete=models.CASCADE, related_name="budget")
    monthly_amount = models.DecimalField(max_digits=12, decimal_places=2, validators=[MinValueValidator(1)])
    hold_at_limit = models.BooleanField(default=False)
    warned_80_for = models.DateField(null=True, blank=True)
    warned_100_for = models.DateField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self):
        return f"{self.group}: {self.monthly_amount}/month"
