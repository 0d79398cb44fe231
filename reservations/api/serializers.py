"""The reservations API's bodies. Input fields take their JSON type only ("2" is not a count,
2 is not a purpose), as the job API's do: the schema says so, and a client that sends a
string where a number belongs should hear it rather than have it coerced."""

from __future__ import annotations

from django.conf import settings
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from rest_framework import serializers

from foundation.api.errors import ErrorSerializer
from reservations.actions import MAX_MEMBERS, MAX_PURPOSE_CHARS
from reservations.models import Reservation, ReservationEvent


class StrictIntegerField(serializers.IntegerField):
    default_error_messages = {"invalid": "Must be a whole number (a JSON number, not a string)."}

    def to_internal_value(self, data):
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


class ZonedDateTimeField(serializers.DateTimeField):
    """ISO 8601 with its offset. DRF would read a naive time in the server's zone; a start
    that means 10:00 somewhere else than the user thinks is worse than a refusal."""

    default_error_messages = {
        "invalid": "An ISO 8601 moment with its offset, e.g. 2026-12-07T10:00:00+01:00.",
        "naive": "Give the time zone (e.g. 2026-12-07T10:00:00+01:00 or ...Z).",
    }

    def to_internal_value(self, value):
        if not isinstance(value, str):
            self.fail("invalid")
        try:
            parsed = parse_datetime(value.strip())
        except ValueError:
            parsed = None
        if parsed is None:
            self.fail("invalid")
        if parsed.tzinfo is None:
            self.fail("naive")
        return super().to_internal_value(value.strip())


class ReservationInputSerializer(serializers.Serializer):
    """A request. The schema bounds what it can; the plan's rules (who may reserve which
    type, how many, how long), the grid and whether the slot is free are answered as 400s
    naming the field."""

    gpu_type = serializers.ChoiceField(choices=[], help_text="A GPU type of the pool, as the plan allows")
    gpu_count = StrictIntegerField(min_value=1, help_text="GPUs of that type, within the plan and the pool")
    start = ZonedDateTimeField(
        help_text="ISO 8601 with the offset, in the future, on the pool's grid (e.g. 10:00, 10:15)"
    )
    duration_minutes = StrictIntegerField(min_value=1, help_text="A multiple of the grid, up to the plan's longest")
    purpose = StrictCharField(
        max_length=MAX_PURPOSE_CHARS, help_text="What the GPUs are for; admins read it before approving"
    )
    members = serializers.ListField(
        child=StrictCharField(max_length=150),
        max_length=MAX_MEMBERS,
        required=False,
        help_text="Usernames of portal users with cluster accounts who may use it too",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The pool's GPU types and grid are settings: read them when the schema is made.
        grid = settings.RESERVATION_GRID_MINUTES
        self.fields["gpu_type"].choices = list(settings.GPU_TYPES)
        self.fields["duration_minutes"].min_value = grid
        self.fields["duration_minutes"].help_text = f"A multiple of {grid}, up to the plan's longest"
        self.fields["start"].help_text = (
            f"ISO 8601 with the offset, in the future (at most {settings.RESERVATION_HORIZON_DAYS} days ahead), "
            f"on the {grid}-minute grid"
        )


class RejectInputSerializer(serializers.Serializer):
    reason = StrictCharField(max_length=2000, help_text="Why; the user reads it (required, not blank)")


class ReservationEventSerializer(serializers.ModelSerializer):
    actor = serializers.SerializerMethodField(help_text="Who; null when the clock moved it")
    # Plain strings: the states are ReservationStateEnum's (a second enum field of the same
    # choices would make drf-spectacular name the set twice, or after a hash).
    from_state = serializers.SerializerMethodField(help_text="The state before; null for the request itself")
    to_state = serializers.CharField(read_only=True, help_text="The state after")
    reason = serializers.CharField(
        read_only=True, allow_blank=True, help_text="Why (a rejection's reason, Slurm's words)"
    )

    class Meta:
        model = ReservationEvent
        fields = ["actor", "from_state", "to_state", "reason", "created_at"]
        read_only_fields = fields

    def get_actor(self, event) -> str | None:
        return event.actor.get_username() if event.actor else None

    def get_from_state(self, event) -> str | None:
        return event.from_state or None


class ReservationSerializer(serializers.ModelSerializer):
    user = serializers.SerializerMethodField(help_text="The owner's username")
    members = serializers.SerializerMethodField(help_text="Usernames who may use it too")
    duration_minutes = serializers.IntegerField(read_only=True)
    slurm_name = serializers.SerializerMethodField(help_text="The Slurm reservation; null until approved")
    nodes = serializers.SerializerMethodField(help_text="The nodes Slurm chose (a hostlist); null until approved")
    error = serializers.SerializerMethodField(help_text="Why it failed (Slurm's words); null otherwise")
    cancellable = serializers.SerializerMethodField(help_text="Whether the owner may still cancel it")
    events = ReservationEventSerializer(many=True, read_only=True, help_text="Every change, oldest first")

    class Meta:
        model = Reservation
        fields = [
            "id", "user", "members", "gpu_type", "gpu_count", "start", "end", "duration_minutes", "purpose",
            "state", "slurm_name", "nodes", "error", "cancellable", "created_at", "events",
        ]  # fmt: skip
        read_only_fields = fields

    def get_user(self, reservation) -> str:
        return reservation.user.get_username()

    def get_members(self, reservation) -> list[str]:
        return sorted(member.get_username() for member in reservation.members.all())

    def get_slurm_name(self, reservation) -> str | None:
        return reservation.slurm_name or None

    def get_nodes(self, reservation) -> str | None:
        return reservation.nodes or None

    def get_error(self, reservation) -> str | None:
        return reservation.error or None

    def get_cancellable(self, reservation) -> bool:
        return reservation.is_cancellable and reservation.start > timezone.now()


class ReservationRefusalSerializer(ErrorSerializer):
    """A refused request: the error body, and when the GPUs are taken in that window the
    nearest starts where they are free."""

    suggestions = serializers.ListField(
        child=serializers.DateTimeField(),
        required=False,
        help_text="The nearest free starts (UTC) for the same GPUs and duration; empty when none within a week "
        "or when the refusal is not about the slot",
    )
