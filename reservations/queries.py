"""Reads other apps make of reservations."""

from django.db.models import Q
from django.utils import timezone

from reservations.models import Reservation, State


def usable_reservations(user):
    """The approved or active reservations `user` may run jobs in (own or shared), not ended."""
    return (
        Reservation.objects.filter(Q(user=user) | Q(members=user))
        .filter(state__in=(State.APPROVED, State.ACTIVE), end__gt=timezone.now())
        .distinct()
        .order_by("start", "id")
    )
