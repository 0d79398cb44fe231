"""The new-job form's choices that cannot go together, and a sweep sent again after a refusal.

A spot job runs on the portal's own cluster only: the form refuses it with a further cluster
on the cluster field, before anything is submitted (no rate-limit count, no job), with the
spec's own problems on the same press. A sweep refused as it was submitted (too many
submissions a minute) keeps its confirmed quote: one press sends it again."""

import re
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.test import Client
from django.utils import timezone

from cluster.clusters.registry import ClusterConfig
from jobs.forms import combination_errors
from jobs.models import Job, Sweep
from jobs.submission import intake as job_intake
from jobs.tests.conftest import GOOD_SPEC
from sweeps import intake as sweep_intake

FURTHER = "site-b"


def further_cluster() -> ClusterConfig:
    return ClusterConfig(
        name=FURTHER,
        slurmrestd_url="http://127.0.0.1:9",
        jwt_key_file=Path("/k"),
        cli_prefix=(),
        job_root="/srv/gpupool/jobs",
        job_root_local=Path("/tmp/site-b-jobs"),
    )


def test_spot_goes_with_the_own_cluster_or_any_never_a_further_one():
    own = django_settings.SLURM_CLUSTER_NAME
    assert combination_errors({"spot": "on", "cluster": FURTHER}, own_cluster=own) == {
        "cluster": [f"A spot job runs on {own} only, on its idle GPUs: choose {own} or Any, or untick Spot."]
    }
    for cluster in (None, "", own, "any"):
        assert combination_errors({"spot": "on", "cluster": cluster}, own_cluster=own) == {}
    assert combination_errors({"cluster": FURTHER}, own_cluster=own) == {}
    assert combination_errors({"spot": "off", "cluster": FURTHER}, own_cluster=own) == {}


@pytest.fixture
def provisioned(alice):
    alice.profile.cluster_username = "alice"
    alice.profile.provisioned_at = timezone.now()
    alice.profile.save()
    return alice


def _browser(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


@pytest.mark.django_db
def test_spot_with_a_further_cluster_is_refused_on_the_field_before_anything_is_submitted(
    provisioned, settings, monkeypatch
):
    settings.EXTRA_CLUSTERS = (further_cluster(),)
    own = settings.SLURM_CLUSTER_NAME
    browser = _browser(provisioned)
    page = browser.get("/jobs/new/").content.decode()
    assert re.search(rf'<option value="{FURTHER}" data-further>{FURTHER}</option>', page)
    assert "data-spot-cluster-note hidden" in page

    def not_counted(request):
        raise AssertionError("a refused combination counts no submission")

    monkeypatch.setattr(job_intake, "count_submission", not_counted)
    form = {**GOOD_SPEC, "spot": "on", "cluster": FURTHER, "command": ""}
    refused = browser.post("/jobs/new/", form)
    assert refused.status_code == 400
    body = refused.content.decode()
    assert f"A spot job runs on {own} only, on its idle GPUs: choose {own} or Any, or untick Spot." in body
    assert "This field is required." in body  # the command's problem, on the same press
    # The page as it comes back offers no further cluster with Spot ticked.
    assert re.search(rf'<option value="{FURTHER}" data-further selected disabled>', body)
    assert "data-spot-cluster-note hidden" not in body
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_spot_on_any_cluster_is_taken(provisioned, settings):
    settings.EXTRA_CLUSTERS = (further_cluster(),)
    taken = _browser(provisioned).post("/jobs/new/", {**GOOD_SPEC, "spot": "on", "cluster": "any"})
    assert taken.status_code == 302
    job = Job.objects.get()
    assert job.cluster == settings.SLURM_CLUSTER_NAME and job.spec["spot"] is True


SWEEP_FORM = {**GOOD_SPEC, "gpu_type": "rtx4090", "sweep": "on", "parameters": "lr = 0.1, 0.2", "throttle": "2"}


def _confirmation(page: str) -> str:
    return re.search(r'<input type="hidden" name="confirm" value="([0-9a-f]+)">', page).group(1)


@pytest.mark.django_db
def test_a_sweep_refused_for_too_many_submissions_goes_with_one_more_press(provisioned, monkeypatch):
    browser = _browser(provisioned)
    quoted = browser.post("/jobs/new/", SWEEP_FORM)
    assert quoted.status_code == 200
    confirm = _confirmation(quoted.content.decode())

    def too_many(request):
        raise job_intake.RateLimited(17)

    monkeypatch.setattr(sweep_intake, "count_submission", too_many)
    refused = browser.post("/jobs/new/", {**SWEEP_FORM, "confirm": confirm})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "Too many submissions; try again in 17 s." in page
    # The quote stands, confirmed, and the values stay: the next press submits.
    assert _confirmation(page) == confirm
    assert "Submit the sweep&#x27;s 2 tasks" in page or "Submit the sweep's 2 tasks" in page
    assert "lr = 0.1, 0.2</textarea>" in page
    assert not Sweep.objects.exists()

    monkeypatch.undo()
    sent = browser.post("/jobs/new/", {**SWEEP_FORM, "confirm": _confirmation(page)})
    assert sent.status_code == 302
    sweep = Sweep.objects.get()
    assert sent["Location"] == f"/jobs/sweeps/{sweep.pk}/" and sweep.point_count == 2
