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
    found = InteractiveSession.objects.filter(job_id=job.pk).values_list("pk", "ready_at").first()
    if found is None:
        return
    session_id, ready_at = found
    publish_session(session_id)
    # Every write of a running job's row is told here: only a server not yet up is followed.
    if job.state == JobState.RUNNING and ready_at is None:
        follow_session_start.delay(session_id)
