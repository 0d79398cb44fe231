from celery import shared_task

from alerts.actions import evaluate


@shared_task(ignore_result=True)
def evaluate_alerts() -> dict:
    return evaluate()
