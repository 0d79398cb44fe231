"""A clone asks for the cluster its job's owner asked for (the cluster is not in the job's spec):
the form's cluster choice pre-filled, and the API's copy sent there unless its body says."""

import re
from pathlib import Path

import pytest
from django.contrib.messages import get_messages

from cluster.clusters.registry import ClusterConfig
from cluster.models import ClusterStatus
from jobs.models import Job
from jobs.submission import intake
from jobs.submission.clusters import cluster_asked_by
from jobs.submission.spec import SpecError
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db
OTHER = "site-b"


@pytest.fixture
def site_b(settings):
    settings.EXTRA_CLUSTERS = (
        ClusterConfig(
            name=OTHER,
            slurmrestd_url="http://127.0.0.1:9",
            jwt_key_file=Path("/k"),
            cli_prefix=(),
            job_root="/srv/gpupool/jobs",
            job_root_local=Path("/tmp/site-b-jobs"),
        ),
    )


def _job(owner, **fields):
    return Job.objects.create(owner=owner, name="run", state="COMPLETED", spec=dict(GOOD_SPEC), **fields)


def test_what_a_clone_asks_for_is_what_its_owner_asked_for(alice, settings):
    assert cluster_asked_by(_job(alice)) == ""
    assert cluster_asked_by(_job(alice, cluster=OTHER, placement="You chose site-b.")) == OTHER
    assert cluster_asked_by(_job(alice, cluster=OTHER, movable=True)) == "any"  # the portal placed it
    assert cluster_asked_by(_job(alice, cluster=settings.SLURM_CLUSTER_NAME, movable=True)) == "any"
    assert cluster_asked_by(_job(alice, cluster=OTHER, moved_from=settings.SLURM_CLUSTER_NAME)) == "any"


def _selected(body: str) -> list[str]:
    """The values of the cluster select's options marked selected."""
    select = body.split('<select id="id_cluster"')[1].split("</select>")[0]
    return [value for value, rest in re.findall(r'<option value="([^"]*)"([^>]*)>', select) if " selected" in rest]


def test_the_form_of_a_clone_keeps_its_jobs_cluster(client, alice, site_b):
    client.force_login(alice)
    there = _job(alice, cluster=OTHER, placement="You chose site-b.")
    response = client.get(f"/jobs/new/?clone={there.pk}")
    assert response.status_code == 200 and response.context["values"]["cluster"] == OTHER
    assert _selected(response.content.decode()) == [OTHER]
    assert list(get_messages(response.wsgi_request)) == []

    placed = _job(alice, cluster=OTHER, movable=True)
    assert _selected(client.get(f"/jobs/new/?clone={placed.pk}").content.decode()) == ["any"]
    home = _job(alice)
    assert _selected(client.get(f"/jobs/new/?clone={home.pk}").content.decode()) == []
    # Another user's job is no one's to clone but its owner's.
    assert client.get(f"/jobs/new/?clone={_job(None, cluster=OTHER).pk}").status_code == 404


def test_a_clone_whose_cluster_cannot_take_it_now_says_so(client, alice, site_b):
    client.force_login(alice)
    there = _job(alice, cluster=OTHER)
    ClusterStatus.objects.create(name=OTHER, answering=False, checked_at="2026-01-01T00:00:00Z")
    response = client.get(f"/jobs/new/?clone={there.pk}")
    assert [str(message) for message in get_messages(response.wsgi_request)] == [
        "The job ran on site-b, which is not answering now: choose a cluster."
    ]
    gone = _job(alice, cluster="site-c")
    response = client.get(f"/jobs/new/?clone={gone.pk}")
    assert "which takes no jobs from the portal now" in str(list(get_messages(response.wsgi_request))[0])


def test_the_apis_clone_is_sent_where_its_job_ran_unless_the_body_says(alice, site_b, api_client_for, monkeypatch):
    asked = []

    def accept(request, data):
        asked.append(data.get("cluster"))
        raise SpecError({"form": ["stopped here"]})

    monkeypatch.setattr(intake, "accept", accept)
    client = api_client_for(alice)
    there = _job(alice, cluster=OTHER)
    assert client.post(f"/api/v1/jobs/{there.pk}/clone", {}, format="json").status_code == 400
    assert client.post(f"/api/v1/jobs/{there.pk}/clone", {"cluster": None}, format="json").status_code == 400
    assert client.post(f"/api/v1/jobs/{_job(alice, movable=True).pk}/clone", {}, format="json").status_code == 400
    assert client.post(f"/api/v1/jobs/{_job(alice).pk}/clone", {}, format="json").status_code == 400
    assert asked == [OTHER, None, "any", None]
