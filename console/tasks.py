from celery import shared_task

from console import gpu_reset
from console.models import GpuReset


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


@shared_task(bind=True, max_retries=None)
def run_image_operation(self, operation_pk: int) -> bool:
    """Drive one image operation (console/image_operations.py) to its end: a pass every few
    seconds; each pass claims before it submits, so a repeated or concurrent run is harmless."""
    from console import image_operations

    if not image_operations.advance(operation_pk):
        raise self.retry(countdown=image_operations.POLL_SECONDS)
    return True
