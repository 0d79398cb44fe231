"""Work queued under a plan its owner left for a lesser one is cancelled, says why, and the
owner hears of it once (jobs/left_plan.py); running work, upgrades and group-paid work stay."""

from __future__ import annotations

import pytest
from django.core import mail

from accounts.actions.lifecycle import change_plan
from conftest import subscribe
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db(transaction=True)


def _job(user, state, qos="premium", **fields):  # Enterprise's QOS
    return Job.objects.create(owner=user, state=state, qos=qos, gpu_type="a100", name=f"{state.lower()}-job", **fields)


def test_leaving_a_paid_plan_cancels_what_waits_under_it_and_tells_the_owner(bob, eager_tasks):
    subscribe(bob, "enterprise")
    waiting = [_job(bob, JobState.SUBMITTING), _job(bob, JobState.SUBMITTING)]
    running = _job(bob, JobState.RUNNING)
    spot = _job(bob, JobState.SUBMITTING, qos="spot")
    change_plan(bob, "free", reason="test")
    for job in waiting:
        job.refresh_from_db()
        assert job.state == JobState.CANCELLED and "queued under your Enterprise plan" in job.error
    running.refresh_from_db()
    spot.refresh_from_db()
    assert running.state == JobState.RUNNING and spot.state == JobState.SUBMITTING
    assert len(mail.outbox) == 1 and "2 jobs" in mail.outbox[0].body and "Free" in mail.outbox[0].body


def test_an_upgrade_leaves_waiting_work_alone(bob, eager_tasks):
    subscribe(bob, "free")
    queued = _job(bob, JobState.SUBMITTING, qos="free")
    change_plan(bob, "enterprise", reason="test")
    queued.refresh_from_db()
    assert queued.state == JobState.SUBMITTING and not mail.outbox
