"""Right-sizing where the next job is asked for: the clone of a job that used a fraction of its GPU's
memory offers the share that fits, with its cost and lately waits, and one click asks for it; no offer
where there are no figures, the job already had a share or needed most of the card."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from jobs.right_size import proposal_for
from telemetry.models import JobEfficiency

pytestmark = pytest.mark.django_db

SPEC = {
    "name": "train",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_count": 1,
    "command": "python train.py",
    "time_limit_minutes": 120,
}


def _finished(owner, *, peak_gb, spec=SPEC, shared=False):
    end = timezone.now() - timedelta(hours=1)
    job = Job.objects.create(
        owner=owner,
        slurm_job_id=9300 + Job.objects.count(),
        state="COMPLETED",
        exit_code=0,
        gpu_type="a100",
        spec=spec,
        start_time=end - timedelta(minutes=30),
        end_time=end,
        elapsed_seconds=1800,
        gpu_allocation={"gpu-a100-01": [0]},
    )
    JobEfficiency.objects.create(
        job=job, computed_at=end, gpu_minutes=30, gpu_util_mean=40, gpu_util_peak=70, gpu_memory_peak_gb=peak_gb,
        gpu_memory_asked_gb=40, idle_fraction=0.1, shared_gpu=shared, series=[],
    )  # fmt: skip
    return job


def _waits(shares: bool, minutes: int, count: int = 5):
    now = timezone.now()
    for _ in range(count):
        Job.objects.create(
            slurm_job_id=9500 + Job.objects.count(), state="COMPLETED", gpu_type="a100",
            quota_gpus=0 if shares else 1, quota_shards=2 if shares else 0,
            submit_time=now - timedelta(hours=2, minutes=minutes), start_time=now - timedelta(hours=2),
        )  # fmt: skip


def test_a_clone_of_a_job_that_used_little_memory_is_offered_the_share_that_fits(alice):
    job = _finished(alice, peak_gb=5.1)
    _waits(shares=False, minutes=40)
    _waits(shares=True, minutes=6)
    proposal = proposal_for(job, alice)
    # 5.1 GB with a quarter's headroom is 6.4 GB: two 4 GB shards of an A100 (40 GB in ten).
    assert proposal.share_gb == 8 and proposal.peak_gb == 5.1
    assert (proposal.wait_whole_minutes, proposal.wait_share_minutes) == (40, 6)
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/new/?clone={job.pk}").content.decode()
    assert "data-right-size" in page and "used at most 5.1 GB of the 40 GB GPU" in page
    assert "after 6 min against 40 min for a whole GPU" in page
    # At the plan's prices: a share costs less than the whole card for the same half hour.
    assert Decimal(proposal.cost_on_share) < Decimal(proposal.cost_as_run)
    assert f"${proposal.cost_on_share} instead of ${proposal.cost_as_run}" in page

    accepted = browser.get(f"/jobs/new/?clone={job.pk}&share=8").content.decode()
    assert 'name="gpu_memory_gb" inputmode="numeric" value="8"' in accepted
    assert 'name="gpu_count" inputmode="numeric" value=""' in accepted
    assert "data-right-size" not in accepted


@pytest.mark.parametrize(
    ("peak_gb", "spec", "shared"),
    [
        (30.0, SPEC, False),  # most of the card: it keeps it
        (5.0, {**SPEC, "gpu_count": 2}, False),  # several GPUs: a share is one GPU's part
        (5.0, {key: value for key, value in SPEC.items() if key != "gpu_count"} | {"gpu_memory_gb": 12}, True),
    ],
)
def test_no_offer_where_the_share_would_not_serve(alice, peak_gb, spec, shared):
    job = _finished(alice, peak_gb=peak_gb, spec=spec, shared=shared)
    assert proposal_for(job, alice) is None


def test_no_figures_no_offer_and_another_users_job_is_not_cloned(alice, bob):
    job = _finished(alice, peak_gb=5.0)
    JobEfficiency.objects.all().delete()
    assert proposal_for(job, alice) is None
    browser = Client()
    browser.force_login(bob)
    assert browser.get(f"/jobs/new/?clone={job.pk}&share=8").status_code == 404
