"""GPU reservations: a user asks for GPUs of one type for a window, an admin approves, Slurm
holds them (a `TRES=gres/gpu:<type>=N` reservation named after the row) for the user and
the members they name.

States: requested -> approved -> active -> finished, or rejected / cancelled / failed.
Every change is a conditional UPDATE from the state it was read in, and leaves an event
(who, when, why) that the user sees as a notice.
"""

from datetime import timedelta

from django.conf import settings
from django.db import models


class State(models.TextChoices):
    REQUESTED = "requested"
    APPROVED = "approved"
    ACTIVE = "active"
    FINISHED = "finished"
    REJECTED = "rejected"
    CANCELLED = "cancelled"
    FAILED = "failed"


# States in which the GPUs are promised, so they count against capacity.
HOLDING = (State.APPROVED, State.ACTIVE)
# States a user may still cancel from (before the start).
CANCELLABLE = (State.REQUESTED, State.APPROVED, State.FAILED)


class Reservation(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="reservations")
    members = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="shared_reservations")
    gpu_type = models.CharField(max_length=32)
    gpu_count = models.PositiveSmallIntegerField()
    start = models.DateTimeField()
    end = models.DateTimeField()
    purpose = models.TextField(max_length=2000)
    state = models.CharField(max_length=16, choices=State.choices, default=State.REQUESTED)
    # What Slurm holds once approved: the reservation's name and the nodes it chose.
    slurm_name = models.CharField(max_length=64, blank=True)
    nodes = models.CharField(max_length=200, blank=True)
    error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["start", "id"]
        indexes = [models.Index(fields=["gpu_type", "state", "start", "end"]), models.Index(fields=["user", "-start"])]
        constraints = [
            models.CheckConstraint(condition=models.Q(end__gt=models.F("start")), name="reservation_ends_after_start"),
            models.CheckConstraint(condition=models.Q(gpu_count__gte=1), name="reservation_holds_a_gpu"),
        ]

    def __str__(self):
        return f"#{self.pk} {self.gpu_count} x {self.gpu_type} {self.start:%Y-%m-%d %H:%M} ({self.state})"

    @property
    def duration(self) -> timedelta:
        return self.end - self.start

    @property
    def duration_minutes(self) -> int:
        return int(self.duration.total_seconds() // 60)

    @property
    def is_cancellable(self) -> bool:
        return self.state in CANCELLABLE

    def slurm_reservation_name(self) -> str:
        # Named after the portal's id, so reconciliation knows which Slurm reservations are ours.
        return f"{settings.RESERVATION_NAME_PREFIX}{self.pk}"


class ReservationEvent(models.Model):
    """One state change: who, when and why. The owner sees these as notices."""

    reservation = models.ForeignKey(Reservation, on_delete=models.CASCADE, related_name="events")
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    from_state = models.CharField(max_length=16, blank=True)
    to_state = models.CharField(max_length=16)
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"#{self.reservation_id}: {self.from_state or '-'} -> {self.to_state}"


class CapacityLock(models.Model):
    """One row per GPU type, locked while a request is checked against capacity and approved,
    so two admins approving overlapping requests at once cannot over-commit the type."""

    gpu_type = models.CharField(max_length=32, unique=True)

    def __str__(self):
        return self.gpu_type
