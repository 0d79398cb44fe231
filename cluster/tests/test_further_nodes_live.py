"""The other dev cluster generation's nodes, read by its mirror pass into FurtherNode rows, counted
with the portal's own wherever GPUs are counted (36, both clusters' 18), with their own pages and
their own emulated telemetry (docs/clusters.md)."""

from dataclasses import replace
from datetime import UTC, datetime

import pytest
from django.test import Client

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client
from cluster.models import FurtherNode, Node
from console import heatmap
from jobs.tasks import run_further_sync
from telemetry import tasks
from telemetry.models import GpuLatest

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
OTHER = "site-b"


def test_the_other_generations_nodes_are_read_counted_paged_and_drawn(settings, other_generation, alice):
    settings.EXTRA_CLUSTERS = (replace(other_generation, name=OTHER),)
    settings.TELEMETRY_EMULATOR, settings.PROMETHEUS_URL = True, ""
    mirror_nodes(rest_client())
    assert "error" not in run_further_sync(OTHER)
    there = {node.name: node for node in FurtherNode.objects.filter(cluster=OTHER)}
    assert set(there) == set(Node.objects.values_list("name", flat=True))  # the same layout, names repeat
    assert sum(node.gpu_total for node in there.values()) == 18

    client = Client()
    landing = client.get("/")
    assert sum(entry["total"] for entry in landing.context["gpus"]) == 36
    assert sum(len(node["g"]) for node in heatmap.build_shared_heatmap()["nodes"]) == 36

    assert tasks.emulate_telemetry() == 36
    assert GpuLatest.all_clusters.filter(cluster=OTHER).count() == 18
    assert GpuLatest.objects.count() == 18  # what knows one cluster reads the own one's

    client.force_login(alice)
    page = client.get(f"/console/nodes/gpu-a100-01/?cluster={OTHER}")
    assert page.status_code == 200 and page.context["node"].cluster == OTHER
    assert page.context["gpus"][0]["sample"].uuid == f"EMU-{OTHER}:gpu-a100-01-0"
    assert "data-node-state" in page.content.decode()
    series = client.get(f"/console/nodes/gpu-a100-01/gpus/0/series.json?cluster={OTHER}").json()
    assert len(series["hour"]["t"]) == 1
    assert FurtherNode.objects.filter(cluster=OTHER).latest("seen_at").seen_at <= datetime.now(UTC)
