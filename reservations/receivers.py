"""What reservations do when something below them changes (accounts send, reservations listen)."""

from __future__ import annotations

from django.dispatch import receiver

from accounts.signals import plan_changed
from foundation.enqueue import delay_or_run
from reservations.tasks import withdraw_reservations_beyond_plan


@receiver(plan_changed)
def withdraw_what_the_plan_no_longer_allows(sender, user_id: int, before, after, **kwargs):
    """Sent on commit: the reservations are looked at on a worker (Slurm may be slow)."""
    if before is not None and before != after:
        delay_or_run(withdraw_reservations_beyond_plan, user_id)
