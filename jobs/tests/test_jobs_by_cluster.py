"""Slurm job ids repeat across clusters: a job's row is keyed by (cluster, Slurm job id), and
every writer that finds a row by its Slurm id finds only its own cluster's (docs/clusters.md)."""

from dataclasses import replace

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from cluster.slurmrest.v0041 import V0041Adapter
from cluster.tests.test_v0041_adapter import captured
from jobs.mirror import passes as mirror
from jobs.mirror import rows
from jobs.models import Job, JobState
from jobs.tests.test_mirror_passes import ListingOnlyClient

pytestmark = pytest.mark.django_db(transaction=True)
TEMPLATE = V0041Adapter().decode_jobs(captured("job_running")[1])[0]
OTHER = "site-b"


@pytest.fixture(autouse=True)
def _fresh_memos():
    mirror.forget_listing_memos()


def _running(job_id, **changes):
    return replace(TEMPLATE, job_id=job_id, **changes)


def test_the_same_slurm_id_on_two_clusters_is_two_jobs_and_never_one_twice(settings):
    own = Job.objects.create(slurm_job_id=7001, state=JobState.RUNNING, name="here")
    assert own.cluster == settings.SLURM_CLUSTER_NAME
    Job.objects.create(cluster=OTHER, slurm_job_id=7001, state=JobState.RUNNING, name="there")
    with pytest.raises(IntegrityError), transaction.atomic():
        Job.objects.create(cluster=OTHER, slurm_job_id=7001)
    assert Job.objects.on_cluster().get(slurm_job_id=7001).name == "here"
    assert Job.objects.on_cluster(OTHER).get(slurm_job_id=7001).name == "there"


def test_what_one_cluster_says_of_a_job_is_written_to_that_clusters_row_alone():
    own = Job.objects.create(slurm_job_id=7002, state=JobState.PENDING, slurm_states="PENDING", name="here")
    assert rows.apply_slurm_job(_running(7002, name="there"), OTHER)
    there = Job.objects.on_cluster(OTHER).get(slurm_job_id=7002)
    assert (there.name, there.state) == ("there", JobState.RUNNING)
    own.refresh_from_db()
    assert (own.name, own.state) == ("here", JobState.PENDING)  # untouched

    # The portal's own cluster's completion hook names ids of its own cluster only.
    written, _ = rows.apply_told_endings({7002: ("COMPLETED", None)})
    assert written == [own.pk]
    there.refresh_from_db()
    assert there.state == JobState.RUNNING


def test_a_pass_over_one_cluster_creates_and_finishes_only_its_own_rows():
    # The portal's own job 7003 runs; the other cluster's listing knows a 7003 of its own and
    # no longer lists its 7004 (which must not finish the portal's own 7004).
    own_3 = Job.objects.create(slurm_job_id=7003, state=JobState.RUNNING, slurm_states="RUNNING")
    own_4 = Job.objects.create(slurm_job_id=7004, state=JobState.RUNNING, slurm_states="RUNNING")
    other_client = ListingOnlyClient([_running(7003, name="there")])
    mirror.mirror_jobs(other_client, cluster=OTHER)
    assert Job.objects.on_cluster(OTHER).get(slurm_job_id=7003).name == "there"
    assert not Job.objects.on_cluster(OTHER).filter(slurm_job_id=7004).exists()
    for row in (own_3, own_4):
        before = row.state, row.slurm_states, row.name
        row.refresh_from_db()
        assert (row.state, row.slurm_states, row.name) == before


def test_the_api_lists_and_exports_one_clusters_jobs_on_request(alice, settings):
    from rest_framework.test import APIClient

    Job.objects.create(owner=alice, slurm_job_id=7005, state=JobState.COMPLETED, name="here")
    Job.objects.create(owner=alice, cluster=OTHER, slurm_job_id=7005, state=JobState.COMPLETED, name="there")
    client = APIClient()
    client.force_authenticate(alice)
    everything = client.get("/api/v1/jobs/").json()["results"]
    assert sorted((job["cluster"], job["name"]) for job in everything) == [
        (settings.SLURM_CLUSTER_NAME, "here"),
        (OTHER, "there"),
    ]
    only = client.get("/api/v1/jobs/", {"cluster": OTHER}).json()["results"]
    assert [(job["cluster"], job["slurm_job_id"], job["name"]) for job in only] == [(OTHER, 7005, "there")]
    # A name no cluster has, on which none of the caller's jobs ran, is a mistake to say, not an empty list.
    for path in ("/api/v1/jobs/", "/api/v1/jobs/export"):
        unknown = client.get(path, {"cluster": "nowhere"})
        assert unknown.status_code == 400, path
        assert "No cluster is named 'nowhere'" in unknown.json()["errors"]["cluster"][0]
        assert settings.SLURM_CLUSTER_NAME in unknown.json()["errors"]["cluster"][0]
    # Bob never ran a job on site-b: for him it is an unknown name (were it configured, an empty list).
    bob_client = APIClient()
    bob_client.force_authenticate(get_user_model().objects.create_user("bob-elsewhere"))
    assert bob_client.get("/api/v1/jobs/", {"cluster": OTHER}).status_code == 400
    refused = client.get("/api/v1/jobs/", {"cluster": "Site B!"})
    assert refused.status_code == 400 and "cluster" in refused.json()["errors"]

    exported = b"".join(client.get("/api/v1/jobs/export", {"cluster": OTHER, "as": "csv"}).streaming_content)
    header, *lines = exported.decode().strip().splitlines()
    assert header.split(",")[:4] == ["id", "uuid", "cluster", "slurm_job_id"]
    assert [line.split(",")[2] for line in lines] == [OTHER]


def test_a_capped_plans_job_never_goes_to_a_further_cluster(alice, settings):
    """Slurm counts a free plan's included hours per cluster: on a second cluster they would
    count afresh, hours nobody pays for. Named, it is refused; with `any` it stays home."""
    from pathlib import Path

    from rest_framework.test import APIClient

    from cluster.clusters.registry import ClusterConfig
    from conftest import subscribe
    from jobs.submission.clusters import choose_cluster, home_only_reason
    from jobs.submission.spec import SpecError, SpecPolicy, parse_job_spec
    from jobs.tests.conftest import GOOD_SPEC
    from plans.catalog import plan_for

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
    subscribe(alice, "free")
    client = APIClient()
    client.force_authenticate(alice)
    free_spec = {**GOOD_SPEC, "gpu_type": "rtx4090", "cluster": OTHER}
    refused = client.post("/api/v1/jobs/", free_spec, format="json")
    assert refused.status_code == 400, refused.content
    assert refused.json()["errors"]["cluster"] == [
        f"This job runs on {settings.SLURM_CLUSTER_NAME}: your plan's included GPU hours are counted on the "
        "portal's own cluster."
    ]
    assert not Job.objects.exists()

    plan = plan_for(alice)
    spec = parse_job_spec({**GOOD_SPEC, "gpu_type": "rtx4090"}, plan=plan, policy=SpecPolicy.from_settings())
    home_only = home_only_reason(spec, reserved=False, group=None, capped_plan=plan.included_hours_are_a_cap)
    # `any` asks no cluster (no CLI here would answer): it stays home and says why.
    choice = choose_cluster("any", spec, partition="gpu", home_only=home_only)
    assert (choice.name, choice.movable) == (settings.SLURM_CLUSTER_NAME, False)
    assert choice.reason.endswith("your plan's included GPU hours are counted on the portal's own cluster.")
    with pytest.raises(SpecError):
        choose_cluster("nowhere", spec, partition="gpu", home_only="")
