import os
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job

OWNER = 4242  # alice's cluster uid in these tests; need not exist on this host


@pytest.fixture
def ended_job(job_root, alice):
    """A job of alice's that ended `days_ago` with `log` as its output (written as her, as Slurm does)."""
    made = []

    def _make(log: str, *, state="FAILED", exit_code=1, days_ago=1, image="nvcr.io/nvidia/pytorch:24.05-py3"):
        number = len(made) + 1
        path = job_root / "u" / f"j{number}" / "stdout.log"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(log)
        os.chown(path, OWNER, OWNER)
        job = Job.objects.create(
            owner=alice,
            cluster_user="u",
            slurm_job_id=9000 + number,
            standard_output=f"/srv/gpupool/jobs/u/j{number}/stdout.log",
            state=state,
            exit_code=exit_code,
            image=image,
            end_time=timezone.now() - timedelta(days=days_ago),
        )
        made.append(job)
        return job

    return _make
