"""Telemetry of several clusters: every sample names its cluster ("" the portal's own), so the GPU
0 of a further cluster's gpu-a100-01 is never the portal's own gpu-a100-01's GPU 0; rows written
before there were further clusters stay the own cluster's; the readers that know of one cluster
(alerts, culling, memory metering: `objects`) read the own cluster's alone."""

import json
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
import time_machine
from django.core.management import CommandError, call_command
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.test import Client

from cluster.clusters.registry import ClusterConfig
from cluster.models import FurtherNode, Node
from jobs.models import Job
from telemetry import tasks
from telemetry.actions.storage import roll_up
from telemetry.emulator import emulated_further_samples
from telemetry.models import GpuHour, GpuLatest, GpuMinute, GpuSampleRaw, NodeToken, cluster_key

NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)
SITE_B = ClusterConfig(
    name="site-b",
    slurmrestd_url="http://127.0.0.1:9",
    jwt_key_file=Path("/k"),
    cli_prefix=(),
    job_root="/srv/gpupool/jobs",
    job_root_local=Path("/tmp/site-b-jobs"),
)


def _batch(compute, node="gpu-a100-01"):
    sample = {
        "index": 0,
        "uuid": "GPU-0",
        "time": NOW.isoformat(),
        "compute_util": compute,
        "memory_util": 40.0,
        "memory_used_mb": 30000,
        "memory_total_mb": 40960,
        "temperature_c": 65.0,
        "power_w": 250.5,
    }
    return {"node": node, "agent": "nvml", "driver_version": "550.54.15", "samples": [sample]}


def _post(body, token):
    return Client().post(
        "/api/v1/telemetry/ingest",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@pytest.fixture
def site_b(settings):
    settings.EXTRA_CLUSTERS = (SITE_B,)
    return SITE_B


@pytest.mark.django_db
@time_machine.travel(NOW, tick=False)
def test_the_same_node_name_on_two_clusters_is_two_gpus_everywhere_in_the_store(site_b, settings):
    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 1, "used_indexes": []}])
    own_token = NodeToken.issue("gpu-a100-01")
    call_command("create_node_token", "gpu-a100-01", "--cluster", "site-b", stdout=(out := StringIO()))
    there_token = out.getvalue().strip()
    assert NodeToken.objects.get(key_hash=NodeToken.hash_key(there_token)).cluster == "site-b"
    assert own_token != there_token and NodeToken.objects.count() == 2

    assert _post(_batch(87.0), own_token).status_code == 202
    assert _post(_batch(12.0), there_token).status_code == 202
    assert cluster_key(None) == cluster_key(settings.SLURM_CLUSTER_NAME) == "" and cluster_key("site-b") == "site-b"
    latest = {row.cluster: row.compute_util for row in GpuLatest.all_clusters.filter(node="gpu-a100-01", index=0)}
    assert latest == {"": 87.0, "site-b": 12.0}
    assert sorted(GpuSampleRaw.all_clusters.values_list("cluster", "compute_util")) == [("", 87.0), ("site-b", 12.0)]
    # What knows one cluster reads the portal's own alone.
    assert [row.compute_util for row in GpuLatest.objects.all()] == [87.0]
    assert [row.compute_util for row in GpuSampleRaw.objects.all()] == [87.0]
    # The driver is kept on the portal's own node; the further cluster's is not written over it.
    assert Node.objects.get(name="gpu-a100-01").driver_version == "550.54.15"

    with time_machine.travel(NOW + timedelta(minutes=1), tick=False):
        roll_up()
    minutes = sorted(GpuMinute.all_clusters.values_list("cluster", "compute_util"))
    assert minutes == [("", 87.0), ("site-b", 12.0)]
    assert sorted(GpuHour.all_clusters.values_list("cluster", "compute_util")) == minutes
    assert list(GpuMinute.objects.values_list("compute_util", flat=True)) == [87.0]


@pytest.mark.django_db
def test_a_node_token_of_an_unknown_cluster_is_refused():
    with pytest.raises(CommandError, match="no cluster is named 'nowhere'"):
        call_command("create_node_token", "gpu-a100-01", "--cluster", "nowhere")
    assert not NodeToken.objects.exists()


@pytest.mark.django_db
def test_the_emulator_draws_a_further_clusters_gpus_as_that_clusters(site_b, settings, alice):
    settings.TELEMETRY_EMULATOR = True
    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # the own cluster's GPUs go through Prometheus
    now = datetime.now(UTC)
    FurtherNode.objects.create(
        cluster="site-b",
        name="gpu-a100-01",
        state="MIXED",
        gpus=[{"type": "a100", "count": 2, "used_indexes": [1]}],
        seen_at=now,
    )
    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 2, "used_indexes": []}])
    # The own cluster's job of the same Slurm id on the same node name holds nothing there.
    Job.objects.create(owner=alice, slurm_job_id=5, state="RUNNING", gpu_allocation={"gpu-a100-01": [0]})
    Job.objects.create(
        owner=alice, cluster="site-b", slurm_job_id=5, state="RUNNING", gpu_allocation={"gpu-a100-01": [1]}
    )
    samples = emulated_further_samples(now)
    assert [(s.cluster, s.node, s.index) for s in samples] == [
        ("site-b", "gpu-a100-01", 0),
        ("site-b", "gpu-a100-01", 1),
    ]
    assert samples[0].compute_util <= 2 and samples[1].compute_util >= 35  # idle, then held
    assert tasks.emulate_telemetry() == 2  # the further cluster's alone: the own's reach Prometheus
    assert set(GpuLatest.all_clusters.values_list("cluster", flat=True)) == {"site-b"}

    # A further cluster not read for a while: its GPUs are not drawn as if their state were known.
    FurtherNode.objects.update(seen_at=now - timedelta(minutes=10))
    assert emulated_further_samples(now) == []


@pytest.mark.django_db(transaction=True)
def test_rows_written_before_clusters_were_keyed_stay_the_own_clusters():
    executor = MigrationExecutor(connection)
    before, after = [("telemetry", "0001_initial")], [("telemetry", "0002_gpu_cluster")]
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps
        moment = datetime.now(UTC)
        values = {
            "compute_util": 50.0,
            "memory_util": 20.0,
            "memory_used_mb": 1000,
            "memory_total_mb": 40960,
            "temperature_c": 50.0,
            "power_w": 100.0,
        }
        old.get_model("telemetry", "GpuLatest").objects.create(
            node="gpu-a100-01", index=0, uuid="GPU-0", time=moment, **values
        )
        old.get_model("telemetry", "GpuSampleRaw").objects.create(node="gpu-a100-01", index=0, time=moment, **values)
        old.get_model("telemetry", "GpuMinute").objects.create(
            node="gpu-a100-01", index=0, bucket=moment, samples=6, **values
        )
        old.get_model("telemetry", "NodeToken").objects.create(node="gpu-a100-01", key_hash="h" * 64)
    finally:
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(after)
    assert GpuLatest.objects.get(node="gpu-a100-01", index=0).cluster == ""
    assert GpuSampleRaw.objects.get().cluster == "" and GpuMinute.objects.get().cluster == ""
    assert NodeToken.objects.get().cluster == ""
