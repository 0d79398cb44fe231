"""The emulator's promise the heatmap tests rely on: a GPU a running job holds is busy (at
least BUSY_COMPUTE_FLOOR % compute) at every time step and for every job's character."""

from datetime import UTC, datetime, timedelta

import pytest

from cluster.models import Node
from jobs.models import Job
from telemetry.emulator import BUSY_COMPUTE_FLOOR, emulated_samples

pytestmark = pytest.mark.django_db


def test_held_gpus_are_always_busy_and_idle_ones_idle():
    Node.objects.create(name="gpu-h100-01", state="MIXED", gpus=[{"type": "h100", "count": 2, "used_indexes": [0]}])
    start = datetime(2026, 12, 1, tzinfo=UTC)
    lowest_held, highest_idle = 100.0, 0.0
    for slurm_job_id in range(1, 41):  # forty characters
        Job.objects.all().delete()
        Job.objects.create(
            slurm_job_id=slurm_job_id, state="RUNNING", gpu_allocation={"gpu-h100-01": [0]},
            tres_per_node="gres/gpu:h100:1",
        )  # fmt: skip
        for seconds in range(0, 6000, 100):  # 100 minutes, a sample every 100 s
            samples = {sample.index: sample for sample in emulated_samples(start + timedelta(seconds=seconds))}
            lowest_held = min(lowest_held, samples[0].compute_util)
            highest_idle = max(highest_idle, samples[1].compute_util)
    assert lowest_held >= BUSY_COMPUTE_FLOOR and highest_idle <= 2
