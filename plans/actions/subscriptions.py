"""Writing subscription history: end the current row, start a new one. Callers (the
account actions in accounts/actions/lifecycle.py) hold the transaction and write the audit entry."""

from __future__ import annotations

from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from plans.models import Plan, Subscription


class SubscriptionError(ValueError):
    pass


@dataclass(frozen=True)
class Change:
    ended: Subscription | None  # the row this change ended (None for a first subscription)
    started: Subscription


def change(user, plan: Plan, status: str = Subscription.Status.ACTIVE, *, at=None) -> Change | None:
    """Make (plan, status) the user's current subscription; None when it already is. The
    row lock on the current subscription serialises two changes of one user; the partial
    unique constraint is the last word."""
    if status not in Subscription.Status.values:
        raise SubscriptionError(f"unknown subscription status {status!r}")
    at = at or timezone.now()
    with transaction.atomic():
        current = Subscription.objects.select_for_update().filter(user=user, ended_at__isnull=True).first()
        if current is not None:
            if current.plan_id == plan.pk and current.status == status:
                return None
            Subscription.objects.filter(pk=current.pk).update(ended_at=at)
            current.ended_at = at
        started = Subscription.objects.create(user=user, plan=plan, status=status, started_at=at)
    return Change(current, started)


def history(user):
    return Subscription.objects.filter(user=user).select_related("plan")
