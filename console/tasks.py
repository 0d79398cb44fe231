from celery import shared_task

from console.actions import canary, gpu_reset, image_operations, power, rolling_restart
from console.models import GpuReset, ImageOperation


@shared_task(bind=True, max_retries=None)
def run_gpu_reset(self, reset_pk: int) -> str:
    """Drive one GPU reset to its end; re-reads the row each time, so a repeat is harmless."""
    reset = GpuReset.objects.select_related("requested_by__profile", "job").get(pk=reset_pk)
    if reset.step == GpuReset.Step.RESERVING and not reset.reservation:
        gpu_reset.reserve_and_submit(reset)
        reset.refresh_from_db()
    if reset.step == GpuReset.Step.RESETTING:
        if gpu_reset.past_deadline(reset):
            gpu_reset.give_up(reset)
        elif not gpu_reset.check_job(reset):
            raise self.retry(countdown=5)
    return GpuReset.objects.get(pk=reset_pk).step


@shared_task(ignore_result=True)
def run_image_operation(operation_pk: int) -> bool:
    """One pass over one image operation (console/actions/image_operations.py), enqueued when it starts
    so its jobs are submitted at once; the beat's sweep below makes the later passes."""
    return image_operations.advance(operation_pk)


@shared_task(ignore_result=True)
def advance_image_operations() -> int:
    """Beat: a pass over every unfinished image operation. A sweep, not a retry chain per
    operation: a worker killed mid-chain leaves its task with the broker until the visibility
    timeout (CELERY_VISIBILITY_TIMEOUT_SECONDS), and progress must not stop that long. Each
    pass claims before it submits, so a pass running beside another does nothing twice."""
    unfinished = list(ImageOperation.objects.filter(finished_at=None).values_list("pk", flat=True))
    for pk in unfinished:
        image_operations.advance(pk)
    return len(unfinished)


@shared_task(ignore_result=True)
def apply_power_policy() -> str:
    """Night mode's SuspendTime and the standby nodes (console/actions/power.py); idempotent."""
    return power.apply_power_policy()


@shared_task(ignore_result=True)
def run_canaries() -> int:
    """Beat: a canary for each maintenance window just ended and after a slurmctld restart, and the
    verdicts of checks whose jobs ended."""
    return canary.start_after_windows() + canary.start_after_slurmctld_restart() + canary.settle()


@shared_task(ignore_result=True)
def advance_rolling_restart(restart_pk: int) -> str:
    """One pass over one rolling restart (console/actions/rolling_restart.py), enqueued at its start
    so its first node is asked at once."""
    return rolling_restart.advance(restart_pk)


@shared_task(ignore_result=True)
def advance_rolling_restarts() -> int:
    """Beat: a pass over every rolling restart with a node to ask or follow. A sweep, as for image
    operations: a killed worker's chain would stall a restart until the broker's visibility timeout."""
    pending = rolling_restart.unfinished()
    for pk in pending:
        rolling_restart.advance(pk)
    return len(pending)
