"""While Slurm is down a submission has one retry at a time: the reconciler re-sends only one
nobody holds (jobs/tasks.py), never a second chain beside a retry that is on its way."""

from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.utils import timezone

from cluster.errors import SlurmTransientError
from jobs.models import Job, JobState
from jobs.tasks import reconcile_submissions, submit_to_slurm
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


@pytest.fixture
def waiting_job(alice, settings):
    settings.SLURMRESTD_URL = UNREACHABLE
    profile = alice.profile
    profile.cluster_username, profile.provisioned_at, profile.cluster_uid = "alice", "2026-01-01T00:00:00Z", None
    profile.save()
    job = Job.objects.create(owner=alice, cluster_user="alice", state=JobState.SUBMITTING, spec=dict(GOOD_SPEC))
    # Old enough for the reconciler to look at it.
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    return job


@pytest.fixture
def enqueued(monkeypatch):
    sent = []
    monkeypatch.setattr("jobs.tasks.submit_to_slurm.delay", sent.append)
    return sent


def test_a_retry_on_its_way_holds_the_row_so_the_reconciler_adds_no_second_chain(waiting_job, enqueued):
    with pytest.raises((Retry, SlurmTransientError)):
        submit_to_slurm.run(waiting_job.pk)
    waiting_job.refresh_from_db()
    assert waiting_job.state == JobState.SUBMITTING and "(attempt 1)" in waiting_job.error
    assert waiting_job.submit_claimed_until > timezone.now(), "held by the retry until it is due"
    assert reconcile_submissions.run() == 0
    assert enqueued == []


def test_the_retry_takes_the_row_again_when_it_is_due(waiting_job, enqueued):
    with pytest.raises((Retry, SlurmTransientError)):
        submit_to_slurm.run(waiting_job.pk)
    # The retry's time has come: its claim has run out, so it may claim the row once more.
    Job.objects.filter(pk=waiting_job.pk).update(submit_claimed_until=timezone.now() - timedelta(seconds=1))
    with pytest.raises((Retry, SlurmTransientError)):
        submit_to_slurm.run(waiting_job.pk)
    waiting_job.refresh_from_db()
    assert waiting_job.submit_attempts == 2 and "(attempt 2)" in waiting_job.error
    # Had that retry been lost (its worker killed, Redis restarted), the reconciler re-sends it.
    Job.objects.filter(pk=waiting_job.pk).update(submit_claimed_until=timezone.now() - timedelta(seconds=1))
    assert reconcile_submissions.run() == 1
    assert enqueued == [waiting_job.pk]


def test_a_group_job_waits_for_the_groups_newest_change_to_reach_slurm(waiting_job, alice, monkeypatch):
    from allauth.account.models import EmailAddress

    from groups import actions as group_actions

    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    Job.objects.filter(pk=waiting_job.pk).update(group=group)
    asked = []

    class RecordingClient:
        timeout = None

        def __getattr__(self, name):
            asked.append(name)
            raise AssertionError(f"Slurm was asked: {name}")

    monkeypatch.setattr("jobs.tasks.rest_client", lambda *args, **kwargs: RecordingClient())
    with pytest.raises((Retry, SlurmTransientError)):
        submit_to_slurm.run(waiting_job.pk)
    waiting_job.refresh_from_db()
    # Nothing was asked of Slurm, which would refuse the job; the owner reads why it waits.
    assert waiting_job.state == JobState.SUBMITTING and waiting_job.slurm_job_id is None
    assert "Vision lab" in waiting_job.error and "still being written to Slurm" in waiting_job.error
    assert "Retrying in" in waiting_job.error
    assert asked == []
