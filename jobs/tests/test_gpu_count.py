"""A job's GPUs are counted in one place, `Job.gpu_count`: the request's count when the row is
born, overwritten from the allocation once Slurm reports one, kept when slurmdbd's record (which
does not name a shard job's GPUs) settles the run; rows written before are counted by a migration."""

import importlib
from dataclasses import replace
from datetime import timedelta

import pytest
from django.apps import apps
from django.utils import timezone

from cluster.records.types import AccountingRecord
from cluster.slurmrest.v0041 import V0041Adapter
from cluster.tests.test_v0041_adapter import captured
from jobs.mirror import rows
from jobs.models import Job
from jobs.submission.quota import gpu_seconds_this_month

pytestmark = pytest.mark.django_db
RUNNING = V0041Adapter().decode_jobs(captured("job_running")[1])[0]
SHARDS = "cpu=1,mem=1000M,node=1,billing=1,gres/shard=30,gres/shard:a100=30"


@pytest.mark.parametrize(
    "tres_per_node, count",
    [("gres/gpu:a100:2", 2), ("gres/shard:a100:3", 1), ("gres/gpu:h100:1,gres/nvme:200", 1), ("", 0)],
)
def test_a_new_row_counts_the_gpus_it_asks_for(tres_per_node, count):
    job = Job.objects.create(tres_per_node=tres_per_node)
    assert Job.objects.get(pk=job.pk).gpu_count == count


def test_the_allocation_overwrites_the_request_and_an_ended_shard_job_keeps_its_gpus():
    pending = replace(RUNNING, job_id=885000, states=("PENDING",), allocated_tres="", gpu_allocation={}, nodes="")
    pending = replace(pending, tres_per_node="gres/shard:a100:30")
    assert rows.apply_slurm_job(pending)
    assert Job.objects.get(slurm_job_id=885000).gpu_count == 1  # the request: shares of one GPU
    # Slurm placed the 30 shares on two GPUs of the node.
    running = replace(pending, states=("RUNNING",), allocated_tres=SHARDS, gpu_allocation={"gpu-a100-01": (0, 1)})
    assert rows.apply_slurm_job(running)
    assert Job.objects.get(slurm_job_id=885000).gpu_count == 2
    # slurmctld forgets an ended job's GPUs; the count stays what the allocation held.
    ended = replace(running, states=("COMPLETED",), gpu_allocation={}, end_time=timezone.now())
    assert rows.apply_slurm_job(ended)
    assert Job.objects.get(slurm_job_id=885000).gpu_count == 2


def test_a_whole_gpu_allocation_overwrites_a_smaller_request():
    asked_one = replace(
        RUNNING, job_id=885001, allocated_tres="gres/gpu=4", gpu_allocation={"gpu-a100-01": (0, 1, 2, 3)}
    )
    assert rows.apply_slurm_job(asked_one)
    assert Job.objects.get(slurm_job_id=885001).gpu_count == 4


def _record(allocated: dict) -> AccountingRecord:
    now = timezone.now()
    return AccountingRecord(
        job_id=1,
        user_name="alice",
        account="default",
        qos="normal",
        states=("COMPLETED",),
        submit_time=now - timedelta(seconds=90),
        start_time=now - timedelta(seconds=60),
        end_time=now,
        elapsed_seconds=60,
        exit_code=0,
        allocated_tres=allocated,
        nodes="gpu-a100-01",
    )


def test_slurmdbd_settles_whole_gpus_and_leaves_a_shard_jobs_count():
    assert rows.accounting_usage(_record({"gres/gpu": 2})) == {"elapsed_seconds": 60, "gpu_count": 2}
    assert rows.accounting_usage(_record({"gres/shard": 30})) == {"elapsed_seconds": 60}


def test_the_months_gpu_hours_count_whole_gpus_and_not_shares(alice):
    ended = {"owner": alice, "state": "COMPLETED", "end_time": timezone.now(), "elapsed_seconds": 3600}
    Job.objects.create(tres_per_node="gres/gpu:a100:2", **ended)
    Job.objects.create(tres_per_node="gres/shard:a100:30", allocated_tres=SHARDS, **ended)
    assert gpu_seconds_this_month(alice) == 2 * 3600


def test_the_migration_counts_rows_written_before_as_they_were_read():
    migration = importlib.import_module("jobs.migrations.0015_job_gpu_count_stored")
    whole = Job.objects.create(tres_per_node="gres/gpu:a100:1", allocated_tres="gres/gpu=1")
    shards = Job.objects.create(
        tres_per_node="gres/shard:a100:30", allocated_tres=SHARDS, gpu_allocation={"n1": [0], "n2": [0]}
    )
    asked = Job.objects.create(tres_per_node="gres/gpu:a100:3")
    settled = Job.objects.create(tres_per_node="gres/gpu:a100:1")
    Job.objects.filter(pk__in=[whole.pk, shards.pk, asked.pk]).update(gpu_count=None)
    Job.objects.filter(pk=settled.pk).update(gpu_count=5)  # slurmdbd's figure, no allocation read
    migration.count_every_row(apps, None)
    counts = dict(Job.objects.values_list("pk", "gpu_count"))
    assert [counts[job.pk] for job in (whole, shards, asked, settled)] == [1, 2, 3, 5]
