"""The heatmap with a further cluster: its nodes after the portal's own, from the snapshot its
mirror pass took (never asked during a page), each GPU held by a portal job named only to that
job's owner (and admins), held by someone outside the portal shown in use, else idle."""

from dataclasses import replace
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.core.cache import caches

from cluster.actions import further_nodes
from cluster.clusters.registry import ClusterConfig
from cluster.models import Node
from cluster.records.types import GpuGroup
from cluster.records.types import Node as SlurmNode
from console import heatmap
from jobs.models import Job

pytestmark = pytest.mark.django_db
SITE_B = ClusterConfig(
    name="site-b",
    slurmrestd_url="http://127.0.0.1:9",
    jwt_key_file=Path("/k"),
    cli_prefix=(),
    job_root="/srv/gpupool/jobs",
    job_root_local=Path("/tmp/site-b-jobs"),
)


class NodesOnly:
    def __init__(self, nodes):
        self.nodes, self.asked = nodes, 0

    def list_nodes(self):
        self.asked += 1
        return self.nodes


def _slurm_node(name, used):
    return SlurmNode(
        name=name, states=("MIXED",), reason="", features=(), partitions=("gpu",), cpus=16, alloc_cpus=2,
        real_memory_mb=64000, alloc_memory_mb=1000, gpus=(GpuGroup("a100", 4, used),), shards_total=0, shards_used=0,
    )  # fmt: skip


@pytest.fixture
def site_b(settings):
    settings.EXTRA_CLUSTERS = (SITE_B,)
    caches[django_settings.HEATMAP_CACHE].delete("gpupool:further-nodes:site-b")
    yield SITE_B
    caches[django_settings.HEATMAP_CACHE].delete("gpupool:further-nodes:site-b")


def test_a_further_clusters_gpus_follow_the_portals_own_with_their_holders(site_b, alice, bob, admin_user):
    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 1, "used_indexes": []}])
    # site-b has a node of the same name: GPU 0 alice's portal job, GPU 1 someone outside the portal.
    Job.objects.create(
        owner=alice,
        cluster="site-b",
        slurm_job_id=11,
        state="RUNNING",
        name="there",
        gpu_allocation={"gpu-a100-01": [0]},
    )
    client = NodesOnly([_slurm_node("gpu-a100-01", (0, 1))])
    assert further_nodes.snapshot_if_due("site-b", client)
    assert not further_nodes.snapshot_if_due("site-b", client) and client.asked == 1  # not due again yet

    shared = heatmap.build_shared_heatmap()
    assert [(node["c"], node["n"]) for node in shared["nodes"]] == [
        (django_settings.SLURM_CLUSTER_NAME, "gpu-a100-01"),
        ("site-b", "gpu-a100-01"),
    ]
    assert shared["own"] == django_settings.SLURM_CLUSTER_NAME
    # The own cluster's GPU 0 is idle: alice's job runs on site-b's node of that name.
    assert shared["nodes"][0]["g"][0][3] == heatmap.IDLE

    mine = heatmap.heatmap_payload(alice, is_admin=False, shared=shared)
    cells = [cell[3] for cell in mine["nodes"][1]["g"]]
    assert cells[1:] == [heatmap.HIDDEN, heatmap.IDLE, heatmap.IDLE]
    assert mine["jobs"][cells[0]]["name"] == "there" and mine["jobs"][cells[0]]["mine"]
    theirs = heatmap.heatmap_payload(bob, is_admin=False, shared=shared)
    assert theirs["jobs"] == [] and theirs["nodes"][1]["g"][0][3] == heatmap.HIDDEN


def test_no_snapshot_no_section_and_a_cluster_without_job_roots_none(site_b, settings):
    assert [node["c"] for node in heatmap.build_shared_heatmap()["nodes"]] == []
    further_nodes.snapshot_if_due("site-b", NodesOnly([_slurm_node("n1", ())]))
    settings.EXTRA_CLUSTERS = (replace(SITE_B, job_root=None, job_root_local=None),)
    assert heatmap.build_shared_heatmap()["nodes"] == []
