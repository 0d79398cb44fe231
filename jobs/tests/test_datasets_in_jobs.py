"""Jobs that mount datasets, without the cluster: the spec's `datasets`, who may mount what, the
NVMe the versions add to the request, the staging lines a job's output carries, the grant the
node tool reads, and what the pages show. The cluster part is datasets/tests/test_node_cache_live.py."""

from __future__ import annotations

import pytest

from datasets import actions as dataset_actions
from datasets import storage
from datasets.actions import node_cache
from datasets.manifest import manifest_sha256
from datasets.models import DatasetFile, DatasetVersion, NodeCopy, VersionState
from groups.models import Membership
from jobs.dataset_staging import parse_staging
from jobs.models import Job, JobDataset, JobState
from jobs.submission.batch_script import OUTPUT_MARKER, render_batch_script
from jobs.submission.spec import SpecError, SpecPolicy, job_spec_from_dict, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.product_plans import product_plan

SHA = "a" * 64


def _parse(**changes):
    return parse_job_spec({**GOOD_SPEC, **changes}, plan=product_plan("pro"), policy=SpecPolicy.from_settings())


@pytest.mark.pure
@pytest.mark.parametrize(
    "value, expected",
    [([3, 7], (3, 7)), (["3", "7"], (3, 7)), ("5", (5,)), (None, ()), ([], ()), ("", ())],
)
def test_datasets_are_version_ids_from_json_or_the_form(value, expected):
    spec = _parse(datasets=value)
    assert spec.datasets == expected
    assert job_spec_from_dict(spec.to_dict()).datasets == expected


@pytest.mark.pure
@pytest.mark.parametrize(
    "value, message",
    [
        ([1, 1], "listed twice"),
        ([0], "positive whole number"),
        ([True], "positive whole number"),
        (["x"], "positive whole number"),
        ([2**60], "positive whole number"),
        (list(range(1, 10)), "at most 8"),
        ({"a": 1}, "must be a list"),
    ],
)
def test_bad_datasets_are_refused_by_field(value, message):
    with pytest.raises(SpecError) as caught:
        _parse(datasets=value)
    assert message in " ".join(caught.value.errors["datasets"])


@pytest.mark.pure
def test_datasets_and_a_data_mount_do_not_go_together():
    with pytest.raises(SpecError) as caught:
        _parse(datasets=[1], data_mount="/mnt/nvme/x")
    assert "data_mount" in caught.value.errors


@pytest.mark.pure
def test_the_batch_script_stages_only_when_there_are_datasets():
    with_data = render_batch_script(_parse(datasets=[4]), job_uuid="j-1", runtime="pyxis")
    without = render_batch_script(_parse(), job_uuid="j-1", runtime="pyxis")
    assert "if [ '1' = 1 ]; then printf '[gpupool] staging datasets" in with_data
    assert "if [ '0' = 1 ]" in without
    # The same lines either way: the flag is the only difference.
    assert len(with_data.splitlines()) == len(without.splitlines())
    assert "$GPUPOOL_DATASET_VIEW:/data:ro" in with_data


@pytest.mark.pure
def test_staging_lines_count_only_before_the_jobs_own_output():
    text = (
        "[gpupool] staging datasets on this node\n"
        "GPUPOOL_DATASET_PROGRESS 4 100 1000\n"
        "GPUPOOL_DATASET_PROGRESS 4 600 1000\n"
        f"GPUPOOL_DATASET_EVICTED {SHA} 5000\n"
        "GPUPOOL_DATASET_READY 4 cold 1000 2.500\n"
        f"{OUTPUT_MARKER}\n"
        "GPUPOOL_DATASET_READY 9 warm 1 0.001\n"  # printed by the job itself: not believed
    )
    lines = parse_staging(text)
    assert lines.progress == {4: 600}
    assert list(lines.ready) == [4] and lines.ready[4][0] == "cold" and str(lines.ready[4][2]) == "2.500"
    assert lines.evicted == [SHA]


# --- with the database -------------------------------------------------------------------------


def _ready(owner=None, *, group=None, name="corpus", size=3 * 10**9, actor=None) -> DatasetVersion:
    dataset = dataset_actions.create_dataset(actor or owner, name=name, group_id=group.pk if group else None)
    version = DatasetVersion.objects.create(
        dataset=dataset,
        number=1,
        state=VersionState.READY,
        size_bytes=size,
        file_count=1,
        sha256=manifest_sha256([("f.bin", size, SHA)]),
        created_by=actor or owner,
    )
    DatasetFile.objects.create(version=version, path="f.bin", size_bytes=size, sha256=SHA)
    return version


def _provisioned(user):
    user.profile.cluster_username = user.username
    user.profile.provisioned_at = "2026-01-01T00:00:00Z"
    user.profile.save()


@pytest.fixture
def lab_group(alice, bob):
    from groups.models import Group

    lab = Group.objects.create(name="Lab", slug="lab", organization="pool", created_by=alice)
    Membership.objects.create(group=lab, user=alice, role="pi")
    Membership.objects.create(group=lab, user=bob, role="member")
    return lab


@pytest.fixture
def quiet_submission(settings):
    settings.SUBMIT_INLINE = False  # the row is what is checked; no worker takes it here


@pytest.mark.django_db
def test_a_job_mounts_its_owners_version_and_asks_for_its_gb_of_nvme(alice, api_client_for, quiet_submission):
    _provisioned(alice)
    version = _ready(alice, size=2_500_000_001)  # 2.5 GB and a byte: 3 GB on the node
    answer = api_client_for(alice).post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [version.pk]}, format="json")
    assert answer.status_code == 201, answer.content
    job = Job.objects.get()
    assert job.tres_per_node.endswith(",gres/nvme:3")
    mount = JobDataset.objects.get(job=job)
    assert (mount.version_id, mount.name, mount.size_bytes) == (version.pk, "corpus", version.size_bytes)
    shown = answer.json()["datasets"]
    assert shown[0]["mounted_at"] == "/data/corpus" and shown[0]["warmth"] == ""
    assert job.spec["datasets"] == [version.pk]


@pytest.mark.django_db
def test_another_users_version_is_refused_as_if_it_did_not_exist(alice, bob, api_client_for, quiet_submission):
    _provisioned(bob)
    alices = _ready(alice)
    client = api_client_for(bob)
    theirs = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [alices.pk]}, format="json")
    missing = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [alices.pk + 1000]}, format="json")
    assert theirs.status_code == missing.status_code == 400
    assert theirs.json()["errors"]["datasets"] == [f"No dataset version {alices.pk} that you may use."]
    assert "that you may use" in missing.json()["errors"]["datasets"][0]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_a_group_member_mounts_the_groups_version_and_a_former_member_cannot(
    alice, bob, api_client_for, quiet_submission, lab_group
):
    _provisioned(bob)
    version = _ready(group=lab_group, actor=alice, name="shared")
    client = api_client_for(bob)
    ok = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [version.pk]}, format="json")
    assert ok.status_code == 201, ok.content
    Membership.objects.filter(group=lab_group, user=bob).update(left_at="2026-01-02T00:00:00Z")
    refused = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [version.pk]}, format="json")
    assert refused.status_code == 400
    assert Job.objects.count() == 1


@pytest.mark.django_db
def test_versions_not_ready_clashing_names_or_too_much_nvme_are_refused(alice, api_client_for, settings):
    _provisioned(alice)
    client = api_client_for(alice)
    version = _ready(alice)
    uploading = DatasetVersion.objects.create(dataset=version.dataset, number=2, created_by=alice)
    answer = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [uploading.pk]}, format="json")
    assert "only a ready version can be mounted" in answer.json()["errors"]["datasets"][0]

    other = _ready(alice, name="other")
    DatasetVersion.objects.filter(pk=uploading.pk).update(
        state=VersionState.READY, sha256=version.sha256, size_bytes=1, file_count=1
    )
    answer = client.post("/api/v1/jobs/", {**GOOD_SPEC, "datasets": [version.pk, uploading.pk]}, format="json")
    assert "Two versions would be mounted at /data/corpus" in answer.json()["errors"]["datasets"][0]

    settings.NVME_MAX_GB = 5
    answer = client.post(
        "/api/v1/jobs/", {**GOOD_SPEC, "datasets": [version.pk, other.pk], "nvme_gb": 1}, format="json"
    )
    assert answer.status_code == 400
    assert "take 6 GB of a node's NVMe" in answer.json()["errors"]["datasets"][0]
    assert not Job.objects.exists()


@pytest.mark.django_db
def test_the_grant_names_the_user_and_each_version_and_the_manifest_is_the_versions(alice, settings, tmp_path):
    settings.DATASET_STORE = tmp_path / "store"
    version = _ready(alice)
    node_cache.write_grant("0b5c2a4e-0000-4000-8000-000000000001", "alice7", [(version, "corpus")])
    grant = (tmp_path / "store/grants/0b5c2a4e-0000-4000-8000-000000000001").read_text()
    assert grant == f"user alice7\nversion {version.pk} {version.sha256} {version.size_bytes} 1 corpus\n"
    assert storage.manifest_sha256(version.pk) == version.sha256
    # A manifest another database left under this id is replaced, not trusted.
    (tmp_path / "store/versions" / f"{version.pk}.manifest").write_text("stale\n")
    node_cache.ensure_manifest(version)
    assert storage.manifest_sha256(version.pk) == version.sha256


@pytest.mark.django_db
def test_a_job_prefers_the_node_feature_of_its_largest_cached_version(alice):
    small, large = _ready(alice, name="small", size=10), _ready(alice, name="large", size=10**9)
    assert node_cache.prefer_for([small.pk, large.pk]) == ""
    node_cache.record_copy("gpu-a100-02", small.pk, small.size_bytes)
    assert node_cache.prefer_for([small.pk, large.pk]) == f"ds_{small.pk}"
    node_cache.record_copy("gpu-a100-01", large.pk, large.size_bytes)
    assert node_cache.prefer_for([small.pk, large.pk]) == f"ds_{large.pk}"
    assert node_cache.desired_features("gpu-a100-01", ["gpu_type:a100"]) == ["gpu_type:a100", f"ds_{large.pk}"]
    assert node_cache.record_eviction("gpu-a100-01", large.sha256)
    assert not NodeCopy.objects.filter(node="gpu-a100-01").exists()


@pytest.mark.django_db
def test_the_node_page_names_only_the_viewers_datasets(alice, bob, client, admin_user):
    from cluster.models import Node

    Node.objects.create(name="gpu-a100-01", state="IDLE", nvme_gb=10)
    mine, theirs = _ready(alice, name="alices", size=2 * 10**9), _ready(bob, name="bobs-secret", size=10**9)
    node_cache.record_copy("gpu-a100-01", mine.pk, mine.size_bytes)
    node_cache.record_copy("gpu-a100-01", theirs.pk, theirs.size_bytes)
    client.force_login(alice)
    page = client.get("/console/nodes/gpu-a100-01/").content.decode()
    assert "alices v1" in page and "bobs-secret" not in page
    assert "1 copy of other users' datasets" in page and "(30 %)" in page
    client.force_login(admin_user)
    page = client.get("/console/nodes/gpu-a100-01/").content.decode()
    assert "alices v1" in page and "bobs-secret v1" in page


@pytest.mark.django_db
def test_an_ended_jobs_grant_is_removed(alice, settings, tmp_path):
    """A grant outliving its job would let a later job of the same user, submitted by hand,
    stage the data again."""
    from jobs import dataset_staging

    settings.DATASET_STORE = tmp_path / "store"
    version = _ready(alice)
    job = Job.objects.create(owner=alice, cluster_user="alice", state=JobState.RUNNING, spec={"datasets": [version.pk]})
    JobDataset.objects.create(job=job, version=version, name="corpus", size_bytes=version.size_bytes)
    node_cache.write_grant(job.uuid, "alice", [(version, "corpus")])
    grant = tmp_path / "store/grants" / str(job.uuid)
    dataset_staging.record_staging(job.pk)
    assert grant.exists()  # running: kept
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED)
    dataset_staging.record_staging(job.pk)
    assert not grant.exists()
