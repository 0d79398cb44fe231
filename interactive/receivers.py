"""A session hears of its job's changes (jobs.signals.job_changed, after commit): its page is told,
and a job that started has its server watched until it answers (interactive/tasks.py)."""

from django.dispatch import receiver

from interactive.events import publish_session
from interactive.models import InteractiveSession
from interactive.tasks import follow_session_start
from jobs.models import JobState
from jobs.signals import job_changed


@receiver(job_changed)
def follow_session_job(sender, job, **kwargs):
    session_id = InteractiveSession.objects.filter(job_id=job.pk).values_list("pk", flat=True).first()
    if session_id is None:
        return
    publish_session(session_id)
    if job.state == JobState.RUNNING:
        follow_session_start.delay(session_id)
