"""Metering on the real dev cluster: jobs submitted through the portal (a GPU, a shard job, an
NVMe cache, a requeued job) run to completion, the metering task runs three times, and each
run has exactly one usage record with slurmdbd's figures, on the user's draft invoice."""

from __future__ import annotations

import time
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.utils import timezone

from billing.actions import charging
from billing.models import UsageRecord
from billing.usage.metering import run_metering
from cluster.clusters.services import rest_client, slurm_cli
from conftest import subscribe
from jobs import actions
from jobs.models import Job
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tasks import run_sync, submit_to_slurm
from plans.catalog import plan_for
from telemetry.actions import storage
from telemetry.emulator import emulated_samples
from testing.slurm import wait_for, wait_for_state, wait_until_requeued

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


def submit(user, **fields) -> Job:
    spec = parse_job_spec(
        {"image": IMAGE, "time_limit_minutes": 5, **fields}, plan=plan_for(user), policy=SpecPolicy.from_settings()
    )
    job = actions.submit(user, spec)
    # In Slurm already when submit returns (the inline path), else the worker's task puts it there.
    assert submit_to_slurm.run(job.pk) in {"submitted", "not-claimable"}
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    return job


def mirror_and_sample():
    """What beat does while jobs run: mirror the cluster, and (dev cluster) emulate the GPUs'
    telemetry from the allocations."""
    run_sync()
    storage.store_samples(emulated_samples(timezone.now()), source="emulator")


def test_each_run_is_metered_once_onto_the_draft(alice, provision, slurm, monkeypatch):
    monkeypatch.setattr(charging, "apply_credits", lambda *args, **kwargs: (0, None))
    subscribe(alice, "enterprise")  # nothing included: every quantity shows in an amount
    # Slurm's start times are whole seconds: a run starting in the second of the plan change would
    # be priced by the plan held at that second's start (Pro, with included hours), not Enterprise.
    time.sleep(1 - datetime.now().microsecond / 1e6 + 0.05)
    profile = provision(alice)
    run_sync()  # a fresh database catches up on the cluster's history first
    gpu = submit(alice, name="gpu", gpu_type="a100", gpu_count=1, command="sleep 12")
    shard = submit(alice, name="shard", gpu_type="a100", gpu_memory_gb=12, command="sleep 6")
    nvme = submit(alice, name="nvme", gpu_type="rtx4090", gpu_count=1, nvme_gb=500, command="sleep 6")
    requeued = submit(alice, name="requeued", gpu_type="rtx4090", gpu_count=1, command="sleep 10")
    assert nvme.tres_per_node == "gres/gpu:rtx4090:1,gres/nvme:500"

    client = rest_client(profile.cluster_username)
    running = wait_for_state(client, nvme.slurm_job_id, {"RUNNING", "COMPLETED"})
    assert "gres/nvme=500" in running.allocated_tres or running.state == "COMPLETED"
    wait_for_state(client, requeued.slurm_job_id, {"RUNNING"})
    mirror_and_sample()
    # Long enough that the first run has elapsed seconds of its own (a requeue within the
    # second it started records 0, seen on 26.05).
    time.sleep(2)
    slurm_cli().requeue_job(requeued.slurm_job_id)
    # A new StartTime only once the run has finished completing: set before, it is overwritten
    # with the requeue's ~2 min BeginTime delay when the completing ends. And not "now": slurmd
    # refuses a launch credential no newer (in whole seconds) than the requeue's revocation
    # ("Job credential revoked", the job FAILED), so the run starts in a later second.
    wait_until_requeued(client, requeued.slurm_job_id)
    slurm_cli().run("scontrol", "update", f"JobId={requeued.slurm_job_id}", "StartTime=now+1")

    jobs = [gpu, shard, nvme, requeued]

    def all_completed():
        mirror_and_sample()
        return all(client.get_job(job.slurm_job_id).state == "COMPLETED" for job in jobs)

    wait_for(all_completed, timeout=240, interval=0.5, what="the four jobs to complete")

    def all_metered():
        run_metering()
        return UsageRecord.objects.filter(user=alice).count() >= 5

    wait_for(all_metered, timeout=120, interval=1, what="slurmdbd to settle every run")
    before = list(UsageRecord.objects.filter(user=alice).order_by("pk").values())
    for _ in range(3):
        result = run_metering()
        assert result.written == 0 and result.charged == 0
    assert list(UsageRecord.objects.filter(user=alice).order_by("pk").values()) == before
    assert len(before) == 5

    records = {job.name: list(UsageRecord.objects.filter(job=job).order_by("run_start")) for job in jobs}
    assert {name: len(rows) for name, rows in records.items()} == {"gpu": 1, "shard": 1, "nvme": 1, "requeued": 2}
    invoices = {row.invoice_id for rows in records.values() for row in rows}
    assert len(invoices) == 1 and UsageRecord.objects.get(pk=records["gpu"][0].pk).invoice.is_draft

    settled = {
        (record.job_id, record.start_time): record
        for record in slurm.list_accounting(
            min(row.run_start for rows in records.values() for row in rows), timezone.now()
        )
    }
    for rows in records.values():
        for row in rows:
            source = settled[(row.slurm_job_id, row.run_start)]
            assert row.seconds == source.elapsed_seconds > 0
            assert row.run_end == source.end_time
    [gpu_row], [shard_row], [nvme_row] = records["gpu"], records["shard"], records["nvme"]
    assert (gpu_row.gpu_type, gpu_row.gpu_seconds) == ("a100", gpu_row.seconds)
    # The mirror saw its GPU and the emulator sampled it: memory from telemetry.
    assert gpu_row.gpu_memory_source == "telemetry" and gpu_row.gpu_memory_gb_seconds > 0
    assert gpu_row.amount_gpu == gpu_row.seconds * Decimal("0.0025")
    assert gpu_row.amount_memory == gpu_row.gpu_memory_gb_seconds * Decimal("0.00002")
    assert (shard_row.gpu_seconds, shard_row.shards, shard_row.gpu_memory_source) == (0, 3, "shards")
    assert shard_row.gpu_memory_gb_seconds == 12 * shard_row.seconds
    assert (nvme_row.nvme_gb, nvme_row.nvme_gb_seconds) == (500, 500 * nvme_row.seconds)
    # 500 GB x seconds at $0.02 per GB-hour, to 12 places (pricing rule 2).
    expected_nvme = (Decimal(500 * nvme_row.seconds) * Decimal("0.02") / 3600).quantize(Decimal("1e-12"), ROUND_HALF_UP)
    assert nvme_row.amount_nvme == expected_nvme
    first, second = records["requeued"]
    assert first.run_start < first.run_end <= second.run_start
    assert first.state == "PENDING"  # slurmdbd's states for it: PENDING, REQUEUED
    assert second.state == "COMPLETED"
