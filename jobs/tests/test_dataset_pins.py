"""Admins pin dataset versions to nodes (jobs/actions.py), without the cluster: who may, what
is refused and changes nothing, the staging job and the pins file the node tool reads, and the
pages. The cluster part is datasets/tests/test_node_pins_live.py."""

from __future__ import annotations

import pytest

from audit.models import AuditLog
from cluster.models import Node
from datasets.models import NodePin, VersionState
from datasets.queries import DatasetError
from jobs import actions as dataset_pins
from jobs.models import Job, JobDataset, JobState
from jobs.tests.test_datasets_in_jobs import _provisioned, _ready

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def cluster_nodes(db):
    Node.objects.create(name="gpu-a100-01", state="IDLE", nvme_gb=10)
    Node.objects.create(name="gpu-a100-02", state="IDLE", nvme_gb=10)
    Node.objects.create(name="cpu-01", state="IDLE", nvme_gb=0)


@pytest.fixture
def staged_by_hand(monkeypatch):
    """Submissions recorded instead of sent (the worker's part is tested with the cluster)."""
    sent = []
    monkeypatch.setattr(dataset_pins, "enqueue_submission", sent.append)
    return sent


def _pins_file(settings, node: str) -> str:
    path = settings.DATASET_STORE / "pins" / node
    return path.read_text() if path.exists() else ""


def test_an_admin_pins_a_version_and_a_staging_job_of_theirs_holds_its_nvme(
    alice, admin_user, settings, tmp_path, staged_by_hand, django_capture_on_commit_callbacks
):
    settings.DATASET_STORE = tmp_path / "store"
    _provisioned(admin_user)
    version = _ready(alice, size=3 * 10**9)
    with django_capture_on_commit_callbacks(execute=True):
        pins = dataset_pins.pin_version(admin_user, version, ["gpu-a100-02", "gpu-a100-01"])
    assert [pin.node for pin in pins] == ["gpu-a100-01", "gpu-a100-02"]
    jobs = list(Job.objects.filter(owner=admin_user).order_by("pinned__node"))
    assert sorted(staged_by_hand) == sorted(job.pk for job in jobs) and len(jobs) == 2
    job = jobs[0]
    assert job.state == JobState.SUBMITTING and job.pinned["node"] == "gpu-a100-01"
    assert job.tres_per_node == "gres/nvme:3"
    assert f'stage {job.uuid} "$SLURM_JOB_ID"' in job.pinned["script"]
    assert JobDataset.objects.get(job=job).version == version
    assert dataset_pins.staging_job(version, "gpu-a100-01") == job
    assert _pins_file(settings, "gpu-a100-01") == f"{version.sha256}\n"
    assert AuditLog.objects.filter(action="dataset.pin", target="gpu-a100-02").exists()

    # Asked again while its staging job has not ended: no second job.
    with django_capture_on_commit_callbacks(execute=True):
        dataset_pins.pin_version(admin_user, version, ["gpu-a100-01"])
    assert Job.objects.filter(owner=admin_user).count() == 2

    assert dataset_pins.unpin(admin_user, version, "gpu-a100-01")
    assert _pins_file(settings, "gpu-a100-01") == ""
    assert not dataset_pins.unpin(admin_user, version, "gpu-a100-01")
    assert _pins_file(settings, "gpu-a100-02") == f"{version.sha256}\n"


@pytest.mark.parametrize(
    "nodes, message",
    [
        ([], "Choose at least one node"),
        (["gpu-h100-09"], "No such node: gpu-h100-09"),
        (["cpu-01"], "has no NVMe cache"),
        (["../etc"], "Not a node name"),
    ],
)
def test_a_bad_node_list_is_refused_and_changes_nothing(alice, admin_user, settings, tmp_path, nodes, message):
    settings.DATASET_STORE = tmp_path / "store"
    _provisioned(admin_user)
    version = _ready(alice, size=10**9)
    with pytest.raises(DatasetError) as caught:
        dataset_pins.pin_version(admin_user, version, nodes)
    assert message in caught.value.message
    assert not NodePin.objects.exists() and not Job.objects.exists()


def test_pins_may_not_exceed_a_nodes_cache_and_only_ready_versions_or_admins_pin(
    alice, admin_user, settings, tmp_path, staged_by_hand
):
    settings.DATASET_STORE = tmp_path / "store"
    _provisioned(admin_user)
    _provisioned(alice)
    six = _ready(alice, name="six", size=6 * 10**9)
    five = _ready(alice, name="five", size=5 * 10**9)
    dataset_pins.pin_version(admin_user, six, ["gpu-a100-01"])
    with pytest.raises(DatasetError) as caught:
        dataset_pins.pin_version(admin_user, five, ["gpu-a100-01"])
    assert "would take 11.0 GB of its 10 GB cache" in caught.value.message
    assert not NodePin.objects.filter(version=five).exists()

    with pytest.raises(DatasetError) as caught:
        dataset_pins.pin_version(alice, five, ["gpu-a100-02"])
    assert caught.value.status == 403
    with pytest.raises(DatasetError):
        dataset_pins.unpin(alice, six, "gpu-a100-01")
    five.state = VersionState.UPLOADING
    five.save()
    with pytest.raises(DatasetError) as caught:
        dataset_pins.pin_version(admin_user, five, ["gpu-a100-02"])
    assert "is not ready" in caught.value.message
    assert list(NodePin.objects.values_list("version_id", flat=True)) == [six.pk]


def test_the_pin_page_is_the_admins_alone(alice, admin_user, client, settings, tmp_path, staged_by_hand):
    settings.DATASET_STORE = tmp_path / "store"
    _provisioned(admin_user)
    version = _ready(alice, size=10**9)
    url = f"/console/datasets/versions/{version.pk}/pins/"
    client.force_login(alice)
    assert client.get(url).status_code in (302, 403)
    refused = client.post(f"/console/datasets/versions/{version.pk}/pin", {"node": "gpu-a100-01"})
    assert refused.status_code in (302, 403)
    assert not NodePin.objects.exists()
    assert "Pin to nodes" not in client.get(f"/datasets/{version.dataset_id}/").content.decode()

    client.force_login(admin_user)
    assert "Pin to nodes" in client.get(f"/datasets/{version.dataset_id}/").content.decode()
    answer = client.post(f"/console/datasets/versions/{version.pk}/pin", {"node": ["gpu-a100-01"]}, follow=True)
    page = answer.content.decode()
    assert "pinned on gpu-a100-01" in page and 'data-pin-node="gpu-a100-02"' in page
    assert "cpu-01" not in page  # no NVMe: not offered
    answer = client.post(f"/console/datasets/versions/{version.pk}/pin", {"node": ["gpu-h100-09"]}, follow=True)
    assert "No such node: gpu-h100-09" in answer.content.decode()
    answer = client.post(f"/console/datasets/versions/{version.pk}/unpin", {"node": "gpu-a100-01"}, follow=True)
    assert "Unpinned from gpu-a100-01" in answer.content.decode()
    assert not NodePin.objects.exists()


def test_the_pins_api_is_the_admins_alone_and_refusals_change_nothing(
    alice, admin_user, api_client_for, settings, tmp_path, staged_by_hand
):
    settings.DATASET_STORE = tmp_path / "store"
    _provisioned(admin_user)
    version = _ready(alice, size=10**9)
    url = f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/pins/"
    owner = api_client_for(alice)
    assert owner.get(url).status_code == 403  # her own dataset, but pins are an admin's act
    assert owner.post(url, {"nodes": ["gpu-a100-01"]}, format="json").status_code == 403
    assert owner.delete(f"{url}gpu-a100-01").status_code == 403

    admin = api_client_for(admin_user)
    assert admin.post(url, {"nodes": []}, format="json").status_code == 400
    refused = admin.post(url, {"nodes": ["gpu-h100-09"]}, format="json")
    assert refused.status_code == 400 and "No such node" in refused.json()["errors"]["nodes"][0]
    assert admin.get(f"/api/v1/datasets/{version.dataset_id}/versions/99/pins/").status_code == 404
    assert not NodePin.objects.exists()

    created = admin.post(url, {"nodes": ["gpu-a100-01"]}, format="json")
    assert created.status_code == 201, created.content
    [pin] = created.json()
    assert (pin["node"], pin["version"], pin["pinned_by"]) == ("gpu-a100-01", version.pk, admin_user.username)
    assert pin["staging_job"]["state"] == JobState.SUBMITTING
    assert admin.get(url).json()[0]["node"] == "gpu-a100-01"
    assert admin.delete(f"{url}gpu-a100-01").status_code == 204
    assert admin.delete(f"{url}gpu-a100-01").status_code == 404
    assert admin.get(url).json() == []
