"""The reconcile's job half on slurmdbd's records as the real daemons answered them (captured
payloads, testing/capture_accounting_payloads.py): a job the restored database lost gets its row
back, under its portal id where slurmdbd kept the comment, with its owner; a job the database has is
left alone; a comment naming an id another job holds claims nothing; twice is once."""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from pathlib import Path

import pytest

from cluster.slurmrest.registry import adapter_for
from gpupool.reconcile import recreate_lost_jobs
from jobs.models import Job

PAYLOADS = Path(__file__).resolve().parents[2] / "cluster" / "tests" / "payloads"


def _records(version: str, name: str):
    body = json.loads((PAYLOADS / version / f"{name}.json").read_text())["body"]
    return adapter_for(version).decode_accounting(body)


@pytest.mark.django_db
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_lost_jobs_get_their_rows_back_once_under_their_portal_id(alice, version):
    (completed,) = _records(version, "accounting_completed")
    (sampled,) = _records(version, "accounting_sampled")
    alice.profile.cluster_username = completed.user_name
    alice.profile.save()
    portal_id = uuid.uuid4()
    lost = replace(completed, comment=f"gpupool:{portal_id}")
    kept = replace(sampled, user_name=completed.user_name)
    Job.objects.create(cluster="gpupool", slurm_job_id=kept.job_id, cluster_user=kept.user_name, name="kept")

    assert recreate_lost_jobs([lost, kept], "gpupool") == (1, 0)
    row = Job.objects.get(slurm_job_id=lost.job_id)
    assert (row.uuid, row.owner, row.state, row.name) == (portal_id, alice, "COMPLETED", completed.name)
    assert (row.start_time, row.end_time, row.elapsed_seconds) == (lost.start_time, lost.end_time, lost.elapsed_seconds)
    assert row.gpu_type == "a100" and row.gpu_count == 1  # the capture ran it on an A100
    assert Job.objects.get(slurm_job_id=kept.job_id).name == "kept"  # the database's own row stands
    assert recreate_lost_jobs([lost, kept], "gpupool") == (0, 0)
    assert Job.objects.count() == 2

    # On another cluster the same Slurm id is another job; an id a row already holds is not taken twice.
    assert recreate_lost_jobs([lost], "site-b") == (1, 0)
    other = Job.objects.get(cluster="site-b", slurm_job_id=lost.job_id)
    assert other.uuid != portal_id
