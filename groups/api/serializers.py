"""The shapes of /api/v1/groups/: what a group, a member, an invitation and an allocation
look like to the caller, and the bodies the writes take."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from foundation.api.errors import StrictBooleanField, StrictCharField
from groups.models import Allocation, Group, GroupRole, Invitation, Membership
from groups.validators import NAME_MAX_LENGTH, validate_group_name


class GroupSerializer(serializers.ModelSerializer):
    slurm_account = serializers.CharField(read_only=True, help_text="The group's Slurm account (`--account`)")
    parent_account = serializers.CharField(read_only=True, help_text="Its organisation's Slurm account")
    my_role = serializers.SerializerMethodField(help_text="The caller's role; null for an admin who is not a member")
    slurm_error = serializers.SerializerMethodField(
        help_text="Why Slurm does not hold the group as it should yet (to its PI, managers and admins; else null)"
    )

    class Meta:
        model = Group
        fields = [
            "id", "name", "slug", "organization", "shares", "slurm_account", "parent_account", "slurm_state",
            "slurm_error", "synced_at", "created_at", "closed_at", "my_role",
        ]  # fmt: skip
        read_only_fields = fields

    def get_my_role(self, group) -> str | None:
        return self.context.get("roles", {}).get(group.pk)

    def get_slurm_error(self, group) -> str | None:
        manages = self.context.get("roles", {}).get(group.pk) in (GroupRole.PI, GroupRole.MANAGER)
        return group.slurm_error if manages or self.context.get("is_admin") else None


SLUG_PATTERN = r"^[a-z][a-z0-9-]{1,29}$"


@extend_schema_field({"type": "string", "minLength": 1, "maxLength": NAME_MAX_LENGTH})
class GroupNameField(serializers.CharField):
    """A group's name by groups.validators alone (DRF's own max_length would say the length a
    second time, in other words); the schema states the length all the same."""

    def __init__(self, **kwargs):
        super().__init__(validators=[validate_group_name], **kwargs)


class GroupInputSerializer(serializers.Serializer):
    name = GroupNameField(
        help_text=f"Up to {NAME_MAX_LENGTH} characters: letters, digits, punctuation and spaces, at least one letter"
    )
    slug = serializers.RegexField(
        SLUG_PATTERN, max_length=30, help_text="Short name: a-z, 0-9 and -; the Slurm account is g-<slug>"
    )
    organization = serializers.RegexField(
        SLUG_PATTERN, max_length=30, required=False, help_text="The parent account's short name (default: the pool's)"
    )


class MemberSerializer(serializers.ModelSerializer):
    user_id = serializers.IntegerField(source="user.pk", read_only=True)
    username = serializers.CharField(source="user.username", read_only=True)
    cluster_user = serializers.CharField(source="user.profile.cluster_username", read_only=True, allow_null=True)

    class Meta:
        model = Membership
        fields = ["user_id", "username", "cluster_user", "role", "joined_at", "is_default"]
        read_only_fields = fields


class RoleInputSerializer(serializers.Serializer):
    role = serializers.ChoiceField(choices=GroupRole.choices)


class InvitationSerializer(serializers.ModelSerializer):
    invited_by = serializers.CharField(source="invited_by.username", read_only=True)

    class Meta:
        model = Invitation
        fields = ["id", "email", "role", "state", "invited_by", "created_at", "expires_at", "decided_at"]
        read_only_fields = fields


class InvitationInputSerializer(serializers.Serializer):
    email = serializers.EmailField()
    role = serializers.ChoiceField(choices=[GroupRole.MEMBER, GroupRole.MANAGER], default=GroupRole.MEMBER)


class AcceptInputSerializer(serializers.Serializer):
    token = serializers.CharField(min_length=1, max_length=200, help_text="The token from the invitation's link")


class AllocationSerializer(serializers.ModelSerializer):
    used_percent = serializers.IntegerField(read_only=True, allow_null=True)

    class Meta:
        model = Allocation
        fields = [
            "id", "gpu_type", "gpu_hours", "approved_gpu_hours", "starts_on", "ends_on", "justification", "state",
            "decision_note", "decided_at", "used_gpu_minutes", "used_percent", "usage_read_at", "renews",
        ]  # fmt: skip
        read_only_fields = fields


class AllocationInputSerializer(serializers.Serializer):
    gpu_type = serializers.ChoiceField(choices=[])
    gpu_hours = serializers.IntegerField(min_value=1, max_value=1_000_000)
    starts_on = serializers.DateField()
    ends_on = serializers.DateField(help_text="The first day it no longer applies; at most 366 days after starts_on")
    justification = serializers.CharField(min_length=10, max_length=4000, help_text="What the time is for")
    renews = serializers.IntegerField(
        required=False, allow_null=True, min_value=1, help_text="The allocation this one renews"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The pool's GPU types are a setting: read when the schema is made, not at import.
        self.fields["gpu_type"].choices = sorted(settings.GPU_TYPES)


class DecisionInputSerializer(serializers.Serializer):
    approve = StrictBooleanField()
    gpu_hours = serializers.IntegerField(min_value=1, max_value=1_000_000, required=False, allow_null=True)
    note = StrictCharField(max_length=500, required=False, allow_blank=True, default="")


class GroupUsageRowSerializer(serializers.Serializer):
    user = serializers.CharField(help_text="Cluster user name")
    gpu_type = serializers.CharField()
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2, coerce_to_string=True)


class GroupUsageSerializer(serializers.Serializer):
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    rows = GroupUsageRowSerializer(
        many=True, help_text="GPU-hours by member and GPU type (a member sees their own only)"
    )
    allocations = AllocationSerializer(many=True)
