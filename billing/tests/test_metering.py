"""Metering (billing/usage/metering.py) on slurmdbd payloads captured from the dev cluster
(`python -m testing.capture_accounting_payloads`): the quantities of a GPU job with an NVMe cache, a
shard job and a requeued job, then the database half: one record per run, however often the
same records are metered, charged to the user's draft."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from billing.actions import charging
from billing.models import UsageRecord
from billing.usage import metering
from billing.usage.metering import gb_per_shard, meter_records, run_metering, runs_of
from cluster.models import Node, SyncRun
from cluster.slurmrest.v0041 import V0041Adapter
from jobs.models import Job
from telemetry.models import GpuSampleRaw

PAYLOADS = Path(__file__).resolve().parents[2] / "cluster" / "tests" / "payloads" / "v0.0.41"
SHARD_GB = gb_per_shard(settings.GPU_TYPES)


def captured(name: str):
    return V0041Adapter().decode_accounting(json.loads((PAYLOADS / f"{name}.json").read_text())["body"])


@pytest.fixture(autouse=True)
def no_credits(monkeypatch):
    monkeypatch.setattr(charging, "apply_credits", lambda *args, **kwargs: (0, None))


@pytest.fixture(autouse=True)
def dev_is_the_portals_own_cluster(settings):
    """The captured payloads are the dev cluster's: metered here as the portal's own ("dev")."""
    settings.SLURM_CLUSTER_NAME = "dev"


# --- quantities, pure ------------------------------------------------------------------------


def test_a_gpu_job_with_an_nvme_cache():
    [record] = captured("accounting_gpu_nvme")
    [run] = runs_of(record, shard_gb=SHARD_GB)
    assert record.elapsed_seconds > 0
    assert (run.gpu_type, run.gpu_count, run.shards) == ("a100", 1, 0)
    assert run.seconds == record.elapsed_seconds
    assert run.gpu_seconds == record.elapsed_seconds
    assert run.nvme_gb == 500 and run.nvme_gb_seconds == 500 * record.elapsed_seconds


def test_a_shard_job_is_gb_per_shard_times_seconds():
    [record] = captured("accounting_shard")
    [run] = runs_of(record, shard_gb=SHARD_GB)
    assert (run.gpu_type, run.gpu_count, run.shards, run.nvme_gb) == ("a100", 0, 3, 100)
    # An A100 is 40 GB in 10 shards: 3 shards hold 12 GB.
    assert run.shard_gb_seconds == 12 * record.elapsed_seconds


def test_a_requeued_job_has_one_run_per_run():
    records = captured("accounting_requeued")
    assert len(records) == 2 and {record.job_id for record in records} == {records[0].job_id}
    runs = [run for record in records for run in runs_of(record, shard_gb=SHARD_GB)]
    assert len(runs) == 2
    assert runs[0].run_start != runs[1].run_start and runs[0].key != runs[1].key
    assert [run.seconds for run in runs] == [record.elapsed_seconds for record in records]
    # The earlier run ended by the requeue: settled for billing, but the job was not over then.
    earlier = min(records, key=lambda record: record.start_time)
    assert "REQUEUED" in earlier.states and earlier.run_is_settled and not earlier.is_settled


def test_runs_slurmdbd_has_not_finished_writing_wait_for_a_later_pass():
    [record] = captured("accounting_gpu_nvme")
    still_running = replace(record, states=("RUNNING",), end_time=None)
    end_first = replace(record, elapsed_seconds=0, allocated_tres={})  # seen on 24.11
    never_ran = replace(record, start_time=None, nodes="None assigned", elapsed_seconds=0)
    cpu_only = replace(record, allocated_tres={"cpu": 1, "mem": 1000})
    for unbilled in (still_running, end_first, never_ran, cpu_only):
        assert runs_of(unbilled, shard_gb=SHARD_GB) == []


# --- writing and charging ---------------------------------------------------------------------


@pytest.fixture
def capture_user(alice):
    alice.profile.cluster_username = "ptcapacct"
    alice.profile.save()
    return alice


def all_captured():
    return [*captured("accounting_gpu_nvme"), *captured("accounting_shard"), *captured("accounting_requeued")]


@pytest.mark.django_db
def test_metering_the_same_records_three_times_writes_each_run_once(capture_user):
    results = [meter_records(all_captured(), cluster="dev") for _ in range(3)]
    assert [result.written for result in results] == [4, 0, 0]
    assert [result.charged for result in results] == [4, 0, 0]
    rows = UsageRecord.objects.filter(cluster="dev")
    assert rows.count() == 4
    assert set(rows.values_list("user_id", flat=True)) == {capture_user.pk}
    assert rows.filter(invoice__isnull=True).count() == 0
    assert len(set(rows.values_list("invoice_id", flat=True))) <= 2  # the month the runs ended in
    shard = rows.get(shards=3)
    assert (shard.gpu_memory_source, shard.gpu_seconds, shard.nvme_gb) == ("shards", 0, 100)
    assert shard.gpu_memory_gb_seconds == 12 * shard.seconds
    gpu = rows.get(nvme_gb=500)
    assert gpu.gpu_memory_source == "none" and gpu.gpu_memory_gb_seconds == 0


@pytest.mark.django_db
def test_any_window_order_or_split_gives_the_same_rows(capture_user):
    records = all_captured()
    meter_records(records[2:], cluster="dev")
    meter_records(list(reversed(records)), cluster="dev")
    meter_records(records[:1], cluster="dev")
    assert UsageRecord.objects.filter(cluster="dev").count() == 4


@pytest.mark.django_db
def test_runs_of_unknown_users_are_skipped_and_counted(alice):
    result = meter_records(all_captured(), cluster="dev")
    assert (result.written, result.unknown_users) == (0, 4)
    assert "ptcapacct" in result.unknown_user_names
    assert not UsageRecord.objects.exists()


@pytest.mark.django_db
def test_a_whole_gpu_run_gets_its_gpus_average_memory_from_telemetry(capture_user):
    [record] = captured("accounting_gpu_nvme")
    node = record.nodes
    Job.objects.create(
        owner=capture_user,
        slurm_job_id=record.job_id,
        cluster_user="ptcapacct",
        state="COMPLETED",
        start_time=record.start_time,
        gpu_allocation={node: [2]},
    )
    # GPU 2 (the job's) at 20 GB then 28 GB: 24 GB on average; GPU 1 (another job's) is ignored.
    for offset, gb in ((1, 20), (3, 28)):
        moment = record.start_time + timedelta(seconds=offset)
        GpuSampleRaw.objects.create(time=moment, node=node, index=2, **sample(gb))
        GpuSampleRaw.objects.create(time=moment, node=node, index=1, **sample(39))
    GpuSampleRaw.objects.create(time=record.end_time + timedelta(seconds=5), node=node, index=2, **sample(40))
    meter_records([record], cluster="dev")
    row = UsageRecord.objects.get(cluster="dev")
    assert row.job.slurm_job_id == record.job_id
    assert row.gpu_memory_source == "telemetry"
    assert row.gpu_memory_gb_seconds == 24 * record.elapsed_seconds
    # Charged on Pro: inside the included A100 hours, so nothing billed.
    assert row.included_gpu_seconds == row.gpu_seconds and row.amount == 0


@pytest.mark.django_db
def test_without_an_allocation_a_run_holding_every_gpu_of_its_node_is_attributed(capture_user):
    [record] = captured("accounting_gpu_nvme")
    node = record.nodes
    Node.objects.create(name=node, state="IDLE", gpus=[{"type": "a100", "count": 1, "used_indexes": []}])
    GpuSampleRaw.objects.create(time=record.start_time + timedelta(seconds=1), node=node, index=0, **sample(10))
    meter_records([record], cluster="dev")
    assert UsageRecord.objects.get().gpu_memory_gb_seconds == 10 * record.elapsed_seconds
    # On a node with more GPUs of the type the run's own cannot be told: GPU-seconds only.
    UsageRecord.objects.all().delete()
    Node.objects.filter(name=node).update(gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    meter_records([record], cluster="dev")
    assert UsageRecord.objects.get().gpu_memory_source == "none"


def sample(gb: int) -> dict:
    return {
        "compute_util": 50.0,
        "memory_util": 50.0,
        "memory_used_mb": gb * 1024,
        "memory_total_mb": 40 * 1024,
        "temperature_c": 50.0,
        "power_w": 200.0,
    }


@pytest.mark.django_db
def test_a_pass_that_cannot_read_slurmdbd_is_recorded_for_admins(monkeypatch):
    from cluster.errors import SlurmTransientError

    class Down:
        def list_accounting(self, start, end):
            raise SlurmTransientError("cannot reach slurmrestd")

    monkeypatch.setattr(metering, "rest_client", lambda **_: Down())
    assert run_metering() is None
    assert "cannot reach" in SyncRun.objects.get(name="metering").last_error


@pytest.mark.django_db
def test_a_pass_reads_the_moving_window_and_records_its_summary(capture_user, monkeypatch):
    windows = []

    class Slurmdbd:
        def list_accounting(self, start, end):
            windows.append((start, end))
            return all_captured()

    monkeypatch.setattr(metering, "rest_client", lambda **_: Slurmdbd())
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    result = run_metering(now)
    assert windows == [(now - timedelta(hours=settings.METERING_WINDOW_HOURS), now)]
    assert result.written == 4
    run = SyncRun.objects.get(name="metering")
    assert run.last_error == "" and "4 new" in run.summary
    assert run_metering(now).written == 0
    assert UsageRecord.objects.count() == 4


@pytest.mark.django_db
def test_a_further_clusters_runs_are_billed_only_to_the_accounts_the_portal_made_there(capture_user):
    """A user of the same name on another cluster, whom the portal did not make there, is
    somebody else: their runs are nobody's bill, until the portal makes the account there."""
    from accounts.models import ClusterAccount

    records = all_captured()
    result = meter_records(records, cluster="site-b")
    assert result.written == 0 and "ptcapacct" in result.unknown_user_names
    assert not UsageRecord.objects.filter(cluster="site-b").exists()

    account = ClusterAccount.objects.create(profile=capture_user.profile, cluster="site-b", uid=5001, gid=5001)
    assert meter_records(records, cluster="site-b").written == 0  # made, but not finished: still not theirs
    ClusterAccount.objects.filter(pk=account.pk).update(provisioned_at=timezone.now())
    assert meter_records(records, cluster="site-b").written == meter_records(records, cluster="dev").written > 0
    assert set(UsageRecord.objects.filter(cluster="site-b").values_list("user_id", flat=True)) == {capture_user.pk}
