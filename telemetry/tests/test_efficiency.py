"""A finished job's efficiency from telemetry's roll-ups over its own GPUs and run: in the job API
(`efficiency`), on the job page with its chart, computed once when the job ends (a sweep for what
a lost message missed), an earlier part of a long run from the hour roll-ups; nothing for a job
still running, nothing of another GPU's."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from jobs.models import Job
from jobs.signals import job_changed
from telemetry import tasks
from telemetry.efficiency import compute
from telemetry.models import GpuHour, GpuMinute, JobEfficiency

pytestmark = pytest.mark.django_db

NODE = "gpu-a100-01"


def _minute(at, index, util, memory_mb, node=NODE):
    GpuMinute.all_clusters.create(
        node=node, index=index, bucket=at, samples=4, compute_util=util, memory_util=util / 2,
        memory_used_mb=memory_mb, memory_total_mb=81920, temperature_c=50, power_w=200,
    )  # fmt: skip


def _job(owner, start, minutes, **fields):
    return Job.objects.create(
        owner=owner,
        slurm_job_id=8100 + Job.objects.count(),
        state=fields.pop("state", "COMPLETED"),
        exit_code=0,
        gpu_type="a100",
        gpu_allocation={NODE: [0, 1]},
        start_time=start,
        end_time=start + timedelta(minutes=minutes),
        spec=fields.pop("spec", {"gpu_type": "a100", "gpu_count": 2, "image": "x", "command": "y"}),
        **fields,
    )


@pytest.fixture
def a_run(alice):
    """A 10-minute run on two A100s: GPU 0 busy at 80 %, GPU 1 idle for the last 6 minutes."""
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(hours=1)
    for minute in range(10):
        at = start + timedelta(minutes=minute)
        _minute(at, 0, 80, 30 * 1024)
        _minute(at, 1, 60 if minute < 4 else 0, 10 * 1024)
        _minute(at, 2, 100, 80 * 1024)  # another job's GPU on the same node
    return _job(alice, start, 10)


def test_the_figures_are_the_jobs_own_gpus_over_its_run(a_run, settings):
    figures = compute(a_run)
    assert figures.gpu_minutes == 20
    assert figures.gpu_util_mean == pytest.approx((80 * 10 + 60 * 4) / 20, abs=0.1)
    assert figures.gpu_util_peak == 80
    assert figures.gpu_memory_peak_gb == 30
    assert figures.gpu_memory_asked_gb == settings.GPU_TYPES["a100"]["memory_gb"]  # a whole A100 per GPU
    assert figures.idle_fraction == pytest.approx(6 / 20)
    assert not figures.shared_gpu
    assert len(figures.series) == 10 and figures.series[0][1:] == [70.0, 30.0]
    compute(a_run)
    assert JobEfficiency.objects.count() == 1  # once per job, rewritten in place


def test_the_api_and_the_page_show_it_to_the_owner(a_run, alice, api_client_for, settings):
    assert api_client_for(alice).get(f"/api/v1/jobs/{a_run.pk}/").json()["efficiency"] is None
    compute(a_run)
    shown = api_client_for(alice).get(f"/api/v1/jobs/{a_run.pk}/").json()["efficiency"]
    assert {"gpu_util_mean", "gpu_memory_peak_gb", "idle_fraction"} <= set(shown)
    assert all(isinstance(shown[name], float) for name in ("gpu_util_mean", "gpu_memory_peak_gb", "idle_fraction"))
    listed = api_client_for(alice).get("/api/v1/jobs/").json()["results"][0]["efficiency"]
    assert listed == shown
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/{a_run.pk}/").content.decode()
    asked = settings.GPU_TYPES["a100"]["memory_gb"]
    assert "data-efficiency" in page and "52 % on average" in page and f"30.0 GB at most of the {asked} GB" in page
    assert 'id="efficiency-series"' in page


def test_a_share_of_a_gpu_compares_with_its_share_and_says_the_figures_are_the_cards(alice):
    start = timezone.now().replace(second=0, microsecond=0) - timedelta(minutes=30)
    for minute in range(3):
        _minute(start + timedelta(minutes=minute), 0, 50, 6 * 1024)
    job = _job(alice, start, 3, spec={"gpu_type": "a100", "gpu_memory_gb": 20, "image": "x", "command": "y"})
    job.gpu_allocation = {NODE: [0]}
    job.save()
    figures = compute(job)
    assert figures.shared_gpu and figures.gpu_memory_asked_gb == 20 and figures.gpu_memory_peak_gb == 6


def test_a_long_runs_earlier_hours_come_from_the_hour_rollups(alice):
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    start = now - timedelta(hours=3)
    GpuHour.all_clusters.create(
        node=NODE, index=0, bucket=start, samples=240, compute_util=10, memory_util=5,
        memory_used_mb=40 * 1024, memory_total_mb=81920, temperature_c=50, power_w=100,
    )  # fmt: skip
    for minute in range(60):
        _minute(now - timedelta(hours=1) + timedelta(minutes=minute), 0, 90, 20 * 1024)
    job = _job(alice, start, 180)
    job.gpu_allocation = {NODE: [0]}
    job.save()
    figures = compute(job)
    assert figures.gpu_minutes == 120  # one hour row (60 minutes) and 60 minute rows
    assert figures.gpu_util_mean == pytest.approx(50)
    assert figures.gpu_memory_peak_gb == 40


def test_a_running_job_or_one_without_telemetry_has_none(alice, a_run, api_client_for):
    running = _job(alice, timezone.now() - timedelta(minutes=5), 5, state="RUNNING")
    assert compute(running) is None
    quiet = _job(alice, timezone.now() - timedelta(days=1), 5)
    quiet.gpu_allocation = {"gpu-h100-02": [0]}
    quiet.save()
    assert compute(quiet) is None
    assert api_client_for(alice).get(f"/api/v1/jobs/{running.pk}/").json()["efficiency"] is None


def test_an_ended_job_is_computed_when_told_and_the_sweep_catches_a_missed_one(a_run, alice, eager_tasks):
    job_changed.send(sender=Job, job=a_run)
    assert JobEfficiency.objects.filter(job=a_run).exists()
    JobEfficiency.objects.all().delete()
    assert tasks.compute_missed_efficiencies() == 1


def test_another_user_sees_nothing_of_it(a_run, bob, api_client_for):
    compute(a_run)
    assert api_client_for(bob).get(f"/api/v1/jobs/{a_run.pk}/").status_code == 404
    browser = Client()
    browser.force_login(bob)
    assert browser.get(f"/jobs/{a_run.pk}/").status_code == 404


def test_the_admins_board_adds_idle_gpu_hours_by_user_group_and_type_with_csv(a_run, alice, admin_user, marketer):
    compute(a_run)
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get("/console/efficiency/?days=7").content.decode()
    assert 'data-efficiency-by="user"' in page and 'data-row="alice"' in page and 'data-row="a100"' in page
    assert "<strong>0.1</strong> of 0.3 GPU-hours" in page  # 6 idle GPU-minutes of 20
    rows = browser.get("/console/efficiency.csv?days=7").content.decode().splitlines()
    assert rows[0] == "by,key,jobs,gpu_hours,mean_compute_percent,idle_gpu_hours,idle_share"
    assert "user,alice,1,0.33,52.0,0.1,0.300" in rows
    assert "group,(no group),1,0.33,52.0,0.1,0.300" in rows
    # A longer period holds it too.
    assert 'data-row="alice"' in browser.get("/console/efficiency/?days=30").content.decode()
    for other in (alice, marketer):
        browser.force_login(other)
        assert browser.get("/console/efficiency/").status_code == 403
        assert browser.get("/console/efficiency.csv").status_code == 403
