"""A further cluster's nodes, GPUs and telemetry wherever the portal's own are shown: the counts of
the landing page, the dashboard, the operations and telemetry pages (every cluster's, the same
as the heatmap's), node and GPU pages that take the cluster (`?cluster=`; an unknown one is a
404, never the own cluster's node of that name), and the heatmap's cells and names that link
to them. Node states read in words, Slurm's term in the title."""

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from cluster.actions import further_nodes
from cluster.clusters.registry import ClusterConfig
from cluster.errors import SlurmTransientError
from cluster.models import ClusterStatus, FurtherNode, Node
from cluster.records.types import GpuGroup
from cluster.records.types import Node as SlurmNode
from console import heatmap
from console import operations as ops
from console.actions import node_actions
from console.views import operations as views_operations
from jobs.models import Job
from telemetry.actions.storage import store_samples
from telemetry.samples import GpuSample

pytestmark = pytest.mark.django_db
OTHER = "site-b"
SITE_B = ClusterConfig(
    name=OTHER,
    slurmrestd_url="http://127.0.0.1:9",
    jwt_key_file=Path("/k"),
    cli_prefix=(),
    job_root="/srv/gpupool/jobs",
    job_root_local=Path("/tmp/site-b-jobs"),
)
# The dev cluster's layout, on each cluster: 2x4 rtx4090, 2x4 a100, 1x2 h100 (18 GPUs).
LAYOUT = [("gpu-4090-01", "rtx4090", 4), ("gpu-4090-02", "rtx4090", 4), ("gpu-a100-01", "a100", 4)]
LAYOUT += [("gpu-a100-02", "a100", 4), ("gpu-h100-01", "h100", 2)]


def _sample(cluster, node, index, compute):
    return GpuSample(
        time=datetime.now(UTC),
        node=node,
        index=index,
        uuid=f"GPU-{cluster or 'own'}-{node}-{index}",
        compute_util=compute,
        memory_util=10.0,
        memory_used_mb=1000,
        memory_total_mb=40960,
        temperature_c=40.0,
        power_w=100.0,
        cluster=cluster,
    )


@pytest.fixture
def two_clusters(settings):
    """Both clusters laid out alike (node names repeat): the own one idle, site-b's gpu-a100-01
    draining with GPU 1 in use; each cluster's gpu-a100-01 GPU 1 with its own sample."""
    settings.EXTRA_CLUSTERS = (SITE_B,)
    now = datetime.now(UTC)
    for name, gpu_type, count in LAYOUT:
        gpus = [{"type": gpu_type, "count": count, "used_indexes": []}]
        Node.objects.create(name=name, state="IDLE", cpus=32, gpus=gpus)
        there = {"state": "IDLE", "state_flags": "", "gpus": gpus}
        if name == "gpu-a100-01":
            there = {"state": "MIXED", "state_flags": "DRAIN", "gpus": [{**gpus[0], "used_indexes": [1]}]}
        FurtherNode.objects.create(cluster=OTHER, name=name, cpus=64, seen_at=now, **there)
    store_samples([_sample("", "gpu-a100-01", 1, 11.0), _sample(OTHER, "gpu-a100-01", 1, 93.0)], source="nvml")
    return settings


def test_a_further_clusters_node_page_is_its_own_never_the_own_clusters_of_that_name(client, alice, two_clusters):
    own_job = Job.objects.create(owner=alice, slurm_job_id=1, name="here", state="RUNNING", nodes="gpu-a100-01")
    there_job = Job.objects.create(
        owner=alice, cluster=OTHER, slurm_job_id=2, name="there", state="RUNNING", gpu_allocation={"gpu-a100-01": [1]}
    )
    client.force_login(alice)
    own = client.get("/console/nodes/gpu-a100-01/")
    there = client.get(f"/console/nodes/gpu-a100-01/?cluster={OTHER}")
    assert own.status_code == there.status_code == 200
    assert own.context["node"].cpus == 32 and there.context["node"].cpus == 64
    assert [entry["job"] for entry in own.context["jobs"]] == [own_job]
    assert [entry["job"] for entry in there.context["jobs"]] == [there_job]
    page = there.content.decode()
    assert 'data-node-cluster="site-b"' in page
    # Its state in words, Slurm's term in the title.
    assert ">partly in use, draining</span>" in page and 'title="Slurm: MIXED+DRAIN"' in page
    # Its GPUs' telemetry and links are site-b's.
    assert "93%" in page and "11%" not in page
    assert f'href="/console/nodes/gpu-a100-01/gpus/1/?cluster={OTHER}"' in page
    assert "data-dataset-cache" not in page  # dataset caches are the own cluster's
    assert "93%" not in own.content.decode() and ">idle</span>" in own.content.decode()
    # Named by the own cluster's name, it is the own node.
    named = client.get(f"/console/nodes/gpu-a100-01/?cluster={django_settings.SLURM_CLUSTER_NAME}")
    assert named.context["node"].cpus == 32


@pytest.mark.parametrize("query", ["?cluster=nowhere", "?cluster=", "?cluster=SITE-B"])
def test_an_unknown_cluster_is_a_404_on_every_node_and_gpu_path(client, alice, two_clusters, query):
    client.force_login(alice)
    for path in ("/console/nodes/gpu-a100-01/", "/console/nodes/gpu-a100-01/gpus/1/"):
        assert client.get(path + query).status_code == 404
    assert client.get(f"/console/nodes/gpu-a100-01/gpus/1/series.json{query}").status_code == 404


def test_a_cluster_that_takes_no_jobs_or_a_node_it_lacks_is_a_404(client, alice, two_clusters):
    client.force_login(alice)
    assert client.get(f"/console/nodes/gpu-a100-03/?cluster={OTHER}").status_code == 404
    two_clusters.EXTRA_CLUSTERS = (replace(SITE_B, job_root=None, job_root_local=None),)
    assert client.get(f"/console/nodes/gpu-a100-01/?cluster={OTHER}").status_code == 404


def test_a_further_clusters_gpu_page_and_series_are_its_gpus(client, alice, two_clusters):
    client.force_login(alice)
    page = client.get(f"/console/nodes/gpu-a100-01/gpus/1/?cluster={OTHER}")
    assert page.status_code == 200
    body = page.content.decode()
    assert page.context["sample"].compute_util == 93.0 and "GPU-site-b-gpu-a100-01-1" in body
    assert f'data-series-url="/console/nodes/gpu-a100-01/gpus/1/series.json?cluster={OTHER}"' in body
    assert f'href="/console/nodes/gpu-a100-01/?cluster={OTHER}"' in body
    assert "data-diagnose" not in body and "data-gpu-reset" not in body  # the own cluster's GPUs only
    series = client.get(f"/console/nodes/gpu-a100-01/gpus/1/series.json?cluster={OTHER}").json()
    assert series["hour"]["compute_util"] == [93.0]
    assert client.get("/console/nodes/gpu-a100-01/gpus/1/series.json").json()["hour"]["compute_util"] == [11.0]
    assert client.get(f"/console/nodes/gpu-h100-01/gpus/2/?cluster={OTHER}").status_code == 404


def test_node_actions_naming_another_cluster_never_act_on_the_own_node(client, admin_user, two_clusters, monkeypatch):
    acted = []
    monkeypatch.setattr(node_actions, "drain", lambda *args: acted.append(args))
    monkeypatch.setattr(node_actions, "resume", lambda *args: acted.append(args))
    client.force_login(admin_user)
    for path in ("drain", "resume", "gpus/1/diagnose", "gpus/1/reset"):
        response = client.post(f"/console/nodes/gpu-a100-01/{path}?cluster={OTHER}", {"reason": "fan"})
        assert response.status_code == 404, path
    assert acted == []
    page = client.get(f"/console/nodes/gpu-a100-01/?cluster={OTHER}").content.decode()
    assert "drain-form" not in page and "Drain and resume are for the portal's own cluster's nodes" in page


def test_the_heatmap_links_every_clusters_nodes_and_carries_their_telemetry_and_state_in_words(alice, two_clusters):
    shared = heatmap.build_shared_heatmap()
    clusters = [node["c"] for node in shared["nodes"]]
    assert clusters == [django_settings.SLURM_CLUSTER_NAME] * 5 + [OTHER] * 5
    assert sum(len(node["g"]) for node in shared["nodes"]) == 36
    own_a100, there_a100 = (node for node in shared["nodes"] if node["n"] == "gpu-a100-01")
    assert own_a100["g"][1][0] == 11 and there_a100["g"][1][0] == 93
    assert there_a100["g"][1][3] == heatmap.HIDDEN and there_a100["g"][0][3] == heatmap.IDLE
    assert (there_a100["s"], there_a100["w"]) == ("MIXED+DRAIN", "partly in use, draining")
    assert own_a100["w"] == "idle"


def test_landing_and_dashboard_count_every_clusters_gpus_as_the_heatmap_does(client, alice, two_clusters):
    landing = client.get("/")
    a100 = next(entry for entry in landing.context["gpus"] if entry["type"] == "a100")
    # 16 a100s; site-b's draining node offers none of its 4.
    assert (a100["total"], a100["free"]) == (16, 12)
    assert a100["clusters"] == [
        {"name": django_settings.SLURM_CLUSTER_NAME, "total": 8, "free": 8},
        {"name": OTHER, "total": 8, "free": 4},
    ]
    body = landing.content.decode()
    assert '12<span class="muted"> of 16 free now' in body and "4 of 8 on site-b" in body
    # The list price says what it is, and a per-second plan's rate shows its hour beside it.
    assert "data-list-price-note" in body and "beyond a plan's included hours" in body
    assert re.search(r"a GPU-second \(\$\d+\.\d\d an hour\)", body)
    assert sum(entry["total"] for entry in landing.context["gpus"]) == 36
    client.force_login(alice)
    dashboard = client.get("/")
    assert sum(entry["total"] for entry in dashboard.context["gpu_types"]) == 36
    assert '12<span class="muted"> / 16 free' in dashboard.content.decode()

    # A further cluster not read for a while counts nowhere it would be taken as there now.
    FurtherNode.objects.update(seen_at=datetime.now(UTC) - timedelta(minutes=10))
    assert sum(entry["total"] for entry in client.get("/").context["gpu_types"]) == 18
    assert sum(len(node["g"]) for node in heatmap.build_shared_heatmap()["nodes"]) == 18


def test_the_nodes_page_lists_every_clusters_nodes_with_their_pages(client, admin_user, two_clusters):
    client.force_login(admin_user)
    body = client.get("/console/nodes/").content.decode()
    assert body.count("<tr data-node=") == 10
    assert f'<a href="/console/nodes/gpu-a100-01/?cluster={OTHER}">gpu-a100-01</a>' in body
    assert '<a href="/console/nodes/gpu-a100-01/">gpu-a100-01</a>' in body
    assert ">partly in use, draining</span>" in body


def test_the_telemetry_page_counts_every_clusters_gpus(client, admin_user, two_clusters):
    client.force_login(admin_user)
    response = client.get("/console/telemetry/")
    assert (response.context["gpus_reporting"], response.context["gpus_total"]) == (2, 36)
    assert [(row["name"], row["gpus"], row["reporting"]) for row in response.context["by_cluster"]] == [
        (django_settings.SLURM_CLUSTER_NAME, 18, 1),
        (OTHER, 18, 1),
    ]
    assert "2 of 36 GPUs reported in the last 2 minutes" in response.content.decode()


class FakeAccounting:
    def __init__(self, error=None):
        self.error, self.asked = error, 0

    def list_accounting(self, start, end):
        self.asked += 1
        if self.error:
            raise self.error
        return []


def test_operations_measure_every_clusters_gpus_and_say_which_cluster_could_not_be_read(
    client, admin_user, two_clusters, monkeypatch
):
    assert ops.gpu_inventory() == {"a100": 16, "h100": 4, "rtx4090": 16}
    clients = {None: FakeAccounting(), OTHER: FakeAccounting()}
    monkeypatch.setattr(views_operations, "rest_client", lambda *args, cluster=None, **kwargs: clients[cluster])
    client.force_login(admin_user)
    response = client.get("/console/operations/")
    assert clients[None].asked == clients[OTHER].asked == 1
    assert response.context["figures"]["now"]["total"] == 36
    assert response.context["figures"]["now"]["by_cluster"] == [
        (django_settings.SLURM_CLUSTER_NAME, 0, 18),
        (OTHER, 0, 18),
    ]
    assert "site-b: 8 a100, 2 h100, 8 rtx4090" in response.content.decode()

    clients[OTHER] = FakeAccounting(SlurmTransientError("cannot reach slurmrestd"))
    response = client.get("/console/operations/")
    assert response.context["figures"]["now"]["total"] == 18  # measured against the clusters read
    body = response.content.decode()
    assert "Slurm accounting of site-b could not be read" in body and "cannot reach slurmrestd" in body

    # A cluster its probe finds not answering is not asked at all.
    ClusterStatus.objects.create(name=OTHER, answering=False, checked_at=datetime.now(UTC))
    clients[OTHER] = FakeAccounting()
    response = client.get("/console/operations/")
    assert clients[OTHER].asked == 0 and "The cluster is not answering." in response.content.decode()


class NodesOnly:
    def __init__(self, nodes):
        self.nodes, self.asked = nodes, 0

    def list_nodes(self):
        self.asked += 1
        return self.nodes


def _slurm_node(name, states, used=()):
    return SlurmNode(
        name=name, states=states, reason="", features=("a100",), partitions=("gpu",), cpus=16, alloc_cpus=2,
        real_memory_mb=64000, alloc_memory_mb=1000, gpus=(GpuGroup("a100", 4, used),), shards_total=0, shards_used=0,
    )  # fmt: skip


def test_a_further_clusters_nodes_are_read_into_rows_that_follow_slurm(two_clusters):
    FurtherNode.objects.all().delete()
    start = datetime.now(UTC)
    client = NodesOnly([_slurm_node("n1", ("IDLE",)), _slurm_node("n2", ("MIXED", "DRAIN"), (0,))])
    assert further_nodes.snapshot_if_due(OTHER, client, now=start)
    assert not further_nodes.snapshot_if_due(OTHER, client, now=start + timedelta(seconds=5))
    assert client.asked == 1
    n2 = FurtherNode.objects.get(cluster=OTHER, name="n2")
    assert (n2.state, n2.state_flags, n2.gpus) == (
        "MIXED",
        "DRAIN",
        [{"type": "a100", "count": 4, "used_indexes": [0]}],
    )
    client.nodes = [_slurm_node("n2", ("IDLE",))]  # n1 is gone, n2 drained and idle
    assert further_nodes.snapshot_if_due(OTHER, client, now=start + timedelta(seconds=11))
    assert [(node.name, node.state, node.seen_at) for node in FurtherNode.objects.all()] == [
        ("n2", "IDLE", start + timedelta(seconds=11))
    ]
    assert [node.name for node in further_nodes.current_nodes(start + timedelta(seconds=30))][-1] == "n2"
    later = start + timedelta(seconds=11 + further_nodes.SNAPSHOT_KEEP_SECONDS + 1)
    assert "n2" not in [node.name for node in further_nodes.current_nodes(later)]
