"""Users read what went wrong in plain words; URLs, paths and commands are for admins."""

import pytest
from celery.exceptions import Retry

from cluster.errors import SlurmTransientError
from jobs import protocol
from jobs.models import Job, JobState
from jobs.tasks import submit_to_slurm
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db
UNREACHABLE = "http://127.0.0.1:9"  # the discard port: nothing listens there


def _ready(user):
    profile = user.profile
    profile.cluster_username, profile.provisioned_at, profile.cluster_uid = user.username, "2026-01-01T00:00:00Z", None
    profile.save()


def test_slurm_unavailable_is_plain_for_the_owner_and_detailed_for_admins(alice, admin_user, client, settings):
    _ready(alice)
    settings.SLURMRESTD_URL = UNREACHABLE
    job = Job.objects.create(owner=alice, cluster_user="alice", state=JobState.SUBMITTING, spec=dict(GOOD_SPEC))
    # Called directly (not by a worker) Celery's retry re-raises the cause.
    with pytest.raises((Retry, SlurmTransientError)):
        submit_to_slurm.run(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.SUBMITTING
    assert "not answering" in job.error and "Retrying" in job.error
    assert "127.0.0.1:9" not in job.error and "127.0.0.1:9" in job.error_detail

    client.force_login(alice)
    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert "not answering" in page and "127.0.0.1:9" not in page
    api = client.get(f"/api/v1/jobs/{job.pk}/").content.decode()
    assert "127.0.0.1:9" not in api

    # An admin who owns such a job sees the technical detail too.
    Job.objects.filter(pk=job.pk).update(owner=admin_user)
    client.force_login(admin_user)
    assert "127.0.0.1:9" in client.get(f"/jobs/{job.pk}/").content.decode()


def test_a_provisioning_failure_is_not_shown_word_for_word(alice, api_client_for):
    profile = alice.profile
    profile.cluster_username = "alice"
    profile.provisioning_error = "sacctmgr -i add user alice failed: /etc/slurm/slurmdbd.conf: permission denied"
    profile.save()
    response = api_client_for(alice).post("/api/v1/jobs/", GOOD_SPEC, format="json")
    assert response.status_code == 409
    assert "not ready" in response.json()["detail"] and "sacctmgr" not in response.content.decode()


def test_a_refusal_keeps_slurms_words_but_not_the_daemons_path():
    from cluster.errors import SlurmRequestError
    from cluster.slurmrest.client import _raise_for_response

    payload = {"errors": [{"error_number": 2014, "error": "Requested node configuration is not available"}]}
    with pytest.raises(SlurmRequestError) as caught:
        _raise_for_response(500, payload, "POST /slurm/v0.0.41/job/submit", "")
    assert "Requested node configuration is not available" in caught.value.public_message
    assert "/slurm/v0.0.41" not in caught.value.public_message and "/slurm/v0.0.41" in caught.value.message


def test_fail_submission_keeps_the_detail_apart(alice):
    job = Job.objects.create(owner=alice, cluster_user="alice", state=JobState.SUBMITTING)
    protocol.fail_submission(job.pk, "The job's directory could not be prepared.", detail="[Errno 13] /srv/x")
    job.refresh_from_db()
    assert job.error == "The job's directory could not be prepared." and job.error_detail == "[Errno 13] /srv/x"
