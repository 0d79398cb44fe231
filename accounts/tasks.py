from celery import shared_task

from accounts import actions
from cluster.errors import SlurmTransientError


@shared_task(bind=True, max_retries=8, default_retry_delay=15)
def provision_user(self, profile_id: int) -> None:
    try:
        actions.provision(profile_id)
    except SlurmTransientError as exc:
        raise self.retry(exc=exc, countdown=min(600, 15 * 2**self.request.retries)) from exc
