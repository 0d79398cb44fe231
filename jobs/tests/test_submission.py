"""Submitting through the task: exactly once, whatever fails in between."""

import pytest

from jobs import actions, protocol
from jobs.models import Job
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tasks import reconcile_submissions, submit_to_slurm
from jobs.tests.conftest import GOOD_SPEC
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


@pytest.fixture(autouse=True)
def _through_the_worker(settings):
    """These tests drive the worker's protocol by hand: no inline attempt first (that path
    has its own tests at the end)."""
    settings.SUBMIT_INLINE = False


def _spec(user, **changes):
    from plans.catalog import plan_for

    return parse_job_spec({**GOOD_SPEC, **changes}, plan=plan_for(user), policy=SpecPolicy.from_settings())


def _slurm_jobs_with_comment(slurm, job):
    return [j for j in slurm.list_jobs() if j.comment == protocol.slurm_comment(job)]


def test_the_task_submits_once_and_a_second_delivery_does_nothing(alice, provision, slurm):
    profile = provision(alice)
    job = actions.submit(alice, _spec(alice, command='echo "ran as $(id -un)"'))
    assert job.state == "SUBMITTING" and job.slurm_job_id is None

    assert submit_to_slurm.run(job.pk) == "submitted"
    assert submit_to_slurm.run(job.pk) == "not-claimable"
    job.refresh_from_db()
    assert job.state == "PENDING" and job.slurm_job_id
    (in_slurm,) = _slurm_jobs_with_comment(slurm, job)
    assert in_slurm.job_id == job.slurm_job_id
    assert in_slurm.user_name == profile.cluster_username
    assert in_slurm.tres_per_node == "gres/gpu:a100:1"


def test_a_lost_answer_is_found_in_slurm_instead_of_submitting_again(alice, provision, slurm):
    provision(alice)
    job = actions.submit(alice, _spec(alice, command="sleep 1"))
    # A first try reached Slurm, then its worker died before recording the answer.
    from jobs.tasks import submission_for

    client = slurm.as_user(job.cluster_user)
    protocol.prepare_job_directory(job, alice.profile.cluster_uid, alice.profile.cluster_gid)
    first_id = client.submit_job(submission_for(job))
    Job.objects.filter(pk=job.pk).update(submit_attempts=1)

    assert submit_to_slurm.run(job.pk) == "submitted"
    job.refresh_from_db()
    assert job.slurm_job_id == first_id
    assert len(_slurm_jobs_with_comment(slurm, job)) == 1


def test_a_permanent_refusal_fails_the_row_with_slurms_message(alice, provision, settings):
    provision(alice)
    job = actions.submit(alice, _spec(alice))
    Job.objects.filter(pk=job.pk).update(partition="no-such-partition")
    assert submit_to_slurm.run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.state == "SUBMIT_FAILED"
    assert "partition" in job.error.lower()


def test_cancel_before_slurm_has_it_and_cancel_after(alice, provision, slurm):
    provision(alice)
    waiting = actions.submit(alice, _spec(alice))
    actions.cancel(waiting)
    waiting.refresh_from_db()
    assert waiting.state == "CANCELLED"
    assert submit_to_slurm.run(waiting.pk) == "not-claimable"
    assert _slurm_jobs_with_comment(slurm, waiting) == []

    running = actions.submit(alice, _spec(alice, command="sleep 300"))
    submit_to_slurm.run(running.pk)
    running.refresh_from_db()
    actions.cancel(running)
    wait_for(lambda: slurm.get_job(running.slurm_job_id).state == "CANCELLED", what="the cancel in Slurm")
    running.refresh_from_db()
    assert running.state == "CANCELLED"


def test_the_reconciler_requeues_only_unclaimed_stale_submissions(alice, provision):
    from datetime import timedelta

    from django.utils import timezone

    provision(alice)
    stale = actions.submit(alice, _spec(alice))
    fresh = actions.submit(alice, _spec(alice))
    claimed = actions.submit(alice, _spec(alice, gpu_type="rtx4090"))
    five_minutes_ago = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk__in=[stale.pk, claimed.pk]).update(created_at=five_minutes_ago)
    Job.objects.filter(pk=claimed.pk).update(submit_claimed_until=timezone.now() + timedelta(minutes=1))
    # Only `stale` qualifies: `fresh` is seconds old and `claimed` belongs to a worker.
    assert reconcile_submissions.run() == 1
    assert fresh.pk != stale.pk


@pytest.mark.usefixtures("_through_the_worker")
def test_inline_the_job_is_in_slurm_when_submit_returns(alice, provision, slurm, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    job = actions.submit(alice, _spec(alice, command="sleep 30"))
    # The returned job says so already (the API answers with it, not re-reading the row).
    assert job.state == "PENDING" and job.slurm_job_id
    answered = (job.state, job.slurm_job_id)
    job.refresh_from_db()
    assert (job.state, job.slurm_job_id) == answered
    assert job.submit_attempts == 1  # born claimed: no claim UPDATE of its own
    assert slurm.get_job(job.slurm_job_id).comment == protocol.slurm_comment(job)
    # The worker, were the task delivered too, finds nothing to do.
    assert submit_to_slurm.run(job.pk) == "not-claimable"


@pytest.mark.usefixtures("_through_the_worker")
def test_inline_the_api_answers_with_the_slurm_job_id(alice, provision, slurm, settings, api_client_for):
    settings.SUBMIT_INLINE = True
    provision(alice)
    response = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, "command": "sleep 30"}, format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "PENDING" and body["slurm_job_id"]
    assert body["cost"] is None and body["cost_so_far"] is None
    assert slurm.get_job(body["slurm_job_id"]).comment == f"{protocol.COMMENT_PREFIX}{body['uuid']}"


@pytest.mark.usefixtures("_through_the_worker")
def test_inline_a_request_that_dies_after_its_commit_leaves_the_job_to_the_reconciler(
    alice, provision, slurm, settings, monkeypatch
):
    """The row is born claimed by its request; were that request's process to die before it
    submits, the claim runs out and the reconciler hands the row to a worker, which submits it
    once."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs import tasks

    settings.SUBMIT_INLINE = True
    provision(alice)
    monkeypatch.setattr(actions, "submit_now", lambda job, profile: True)  # "died" after the commit
    queued = []
    monkeypatch.setattr(tasks, "enqueue_submission", queued.append)
    job = actions.submit(alice, _spec(alice, command="sleep 30"))
    job.refresh_from_db()
    assert job.state == "SUBMITTING" and job.submit_claimed_until > timezone.now()
    Job.objects.filter(pk=job.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    assert reconcile_submissions.run() == 0  # still claimed by its request
    Job.objects.filter(pk=job.pk).update(submit_claimed_until=timezone.now() - timedelta(seconds=1))
    assert reconcile_submissions.run() == 1 and queued == [job.pk]
    assert submit_to_slurm.run(job.pk) == "submitted"
    job.refresh_from_db()
    assert job.state == "PENDING" and len(_slurm_jobs_with_comment(slurm, job)) == 1


@pytest.mark.usefixtures("_through_the_worker")
def test_inline_a_slurmrestd_that_does_not_answer_hands_the_job_to_a_worker(alice, provision, settings, monkeypatch):
    from jobs import tasks

    settings.SUBMIT_INLINE = True
    settings.SLURMRESTD_URL = "http://127.0.0.1:9"  # nothing listens: a transient failure
    provision(alice)
    queued = []
    monkeypatch.setattr(tasks, "enqueue_submission", queued.append)
    job = actions.submit(alice, _spec(alice))
    job.refresh_from_db()
    assert job.state == "SUBMITTING" and job.slurm_job_id is None
    assert queued == [job.pk]
    assert job.submit_claimed_until is None  # the worker may claim it at once
    assert "not answering" in job.error and "Retrying" in job.error  # said on the row at once
