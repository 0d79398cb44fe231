"""Beat tasks: the clock moving reservations on, and the drift check shown to admins."""

from celery import shared_task
from django.utils import timezone

from cluster.clusters.sync import record_run, single_flight
from cluster.errors import SlurmError
from reservations import actions, reconcile


@shared_task(ignore_result=True)
def advance_reservations() -> int:
    return actions.advance()


@shared_task(ignore_result=True)
def check_reservations() -> int | None:
    """Record the drift on the SyncRun row "reservations" (the console shows failures)."""
    with single_flight("check_reservations", timeout=120) as acquired:
        if not acquired:
            return None
        started = timezone.now()
        try:
            drift = reconcile.check()
        except SlurmError as exc:
            record_run("reservations", started, error=f"Slurm: {exc.message}")
            return None
        if drift:
            record_run("reservations", started, error="drift: " + "; ".join(str(item) for item in drift))
        else:
            record_run("reservations", started, summary="portal and Slurm agree")
        return len(drift)


# Another writer moved the reservation first: tried again with Celery's back-off (15 s ... 600 s).
@shared_task(
    max_retries=8, autoretry_for=(actions.StateError,), retry_backoff=15, retry_backoff_max=600, retry_jitter=False
)
def withdraw_reservations_beyond_plan(user_id: int) -> int:
    """After a plan change: the user's reservations their plan no longer allows, cancelled."""
    return len(actions.withdraw_beyond_plan(user_id))
