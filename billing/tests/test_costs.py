"""A job's cost on GET /api/v1/jobs/{id}/ and on its page: the sum of its runs' charges once
metered (a requeued job has several), an estimate while it runs, and nobody else's job."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
import time_machine
from django.db import connection
from django.test.utils import CaptureQueriesContext

from billing.actions.charging import charge
from billing.models import UsageRecord
from billing.tests.usage_records import record
from conftest import subscribe
from jobs.models import Job

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 5, 15, 12, 0, tzinfo=UTC)
PRO_A100_SECONDS = 100 * 3600


@pytest.fixture(autouse=True)
def _frozen():
    with time_machine.travel(NOW, tick=False):
        yield


def _job(owner, state="COMPLETED", *, tres="gres/gpu:a100:1", started=None, slurm_job_id=None, **fields):
    started = started or NOW - timedelta(hours=2)
    return Job.objects.create(
        owner=owner,
        slurm_job_id=slurm_job_id,
        name="train",
        state=state,
        gpu_type="a100",
        tres_per_node=tres,
        quota_gpus=1,
        start_time=started,
        end_time=None if state == "RUNNING" else started + timedelta(hours=1),
        **fields,
    )


def _get(client, job):
    response = client.get(f"/api/v1/jobs/{job.pk}/")
    assert response.status_code == 200, response.content
    return response.json()


def _use_up_included_hours(user, left_seconds=0):
    """A charged run earlier this month that used the plan's A100 hours but `left_seconds`."""
    used = PRO_A100_SECONDS - left_seconds
    record(user, NOW - timedelta(days=3), seconds=used, included=used)


def test_the_cost_of_an_ended_job_is_the_sum_of_its_runs(alice, api_client_for):
    job = _job(alice, slurm_job_id=5101)
    # Requeued once: two runs, two records. The first partly on the plan's hours.
    record(alice, NOW - timedelta(hours=3), job=job, seconds=1800, included=600, credit=200)
    record(
        alice,
        NOW - timedelta(hours=1),
        job=job,
        seconds=1000,
        amount_memory=Decimal("0.864"),
        amount_nvme=Decimal("5"),
    )
    body = _get(api_client_for(alice), job)
    # (1800 - 800) x 0.0015 + 1000 x 0.0015 + 0.864 + 5 = 1.50 + 1.50 + 5.864
    assert body["cost"] == "8.864"
    assert body["cost_so_far"] is None
    detail = body["cost_detail"]
    assert detail["basis"] == "metered" and detail["runs"] == 2 and detail["plan"] == "pro"
    assert (detail["gpu_seconds"], detail["included_gpu_seconds"], detail["credit_gpu_seconds"]) == (2800, 600, 200)
    assert detail["billable_gpu_seconds"] == 2000
    assert (detail["amount_gpu"], detail["amount_memory"], detail["amount_nvme"]) == ("3.00", "0.864", "5.00")


def test_no_cost_until_every_run_is_charged(alice, api_client_for):
    job = _job(alice, slurm_job_id=5102)
    client = api_client_for(alice)
    assert _get(client, job)["cost"] is None  # not metered yet
    record(alice, NOW - timedelta(hours=3), job=job, seconds=1800)
    record(alice, NOW - timedelta(hours=1), job=job, seconds=600, charged=False)
    body = _get(client, job)
    assert body["cost"] is None and body["cost_detail"] is None


def test_a_running_job_has_an_estimate_so_far_at_the_plans_prices(alice, api_client_for):
    _use_up_included_hours(alice)
    job = _job(alice, "RUNNING", started=NOW - timedelta(seconds=1800), slurm_job_id=5103)
    body = _get(api_client_for(alice), job)
    assert body["cost"] is None
    assert body["cost_so_far"] == "2.70"  # 1800 s x $0.0015, the list A100 price (Pro pays list)
    detail = body["cost_detail"]
    assert detail["basis"] == "estimate" and "Estimate" in detail["note"]
    assert (detail["gpu_seconds"], detail["included_gpu_seconds"], detail["billable_gpu_seconds"]) == (1800, 0, 1800)


def test_the_estimate_uses_the_included_hours_left_first(alice, bob, api_client_for):
    _use_up_included_hours(alice, left_seconds=600)
    job = _job(alice, "RUNNING", started=NOW - timedelta(seconds=1800), slurm_job_id=5104)
    detail = _get(api_client_for(alice), job)["cost_detail"]
    assert (detail["included_gpu_seconds"], detail["billable_gpu_seconds"]) == (600, 1200)
    # A later job of hers gets none of those 600 s, asked about alone or in the list.
    later = _job(alice, "RUNNING", started=NOW - timedelta(seconds=900), slurm_job_id=5114)
    body = _get(api_client_for(alice), later)
    assert body["cost_so_far"] == "1.35" and body["cost_detail"]["included_gpu_seconds"] == 0
    listed = {row["id"]: row for row in api_client_for(alice).get("/api/v1/jobs/").json()["results"]}
    assert (listed[job.pk]["cost_so_far"], listed[later.pk]["cost_so_far"]) == ("1.80", "1.35")
    # bob has all of his hours: the same run is covered by them.
    bobs = _job(bob, "RUNNING", started=NOW - timedelta(seconds=1800), slurm_job_id=5105)
    body = _get(api_client_for(bob), bobs)
    assert body["cost_so_far"] == "0.00" and body["cost_detail"]["included_gpu_seconds"] == 1800


def test_estimates_for_enterprise_shards_nvme_and_a_requeued_run(alice, api_client_for):
    subscribe(alice, "enterprise")
    client = api_client_for(alice)
    started = NOW - timedelta(seconds=1800)
    two = _job(alice, "RUNNING", tres="gres/gpu:a100:2", started=started, slurm_job_id=5106)
    assert _get(client, two)["cost_so_far"] == "9.00"  # 2 x 1800 x the enterprise $0.0025
    # Three 4 GB shards: 12 GB x 1800 s x $0.00002, no GPU-seconds.
    shards = _job(alice, "RUNNING", tres="gres/shard:a100:3", started=started, slurm_job_id=5107)
    body = _get(client, shards)
    assert body["cost_so_far"] == "0.432" and body["cost_detail"]["gpu_seconds"] == 0
    # 500 GB of NVMe for half an hour: 250 GB-h x $0.02 = 5.00, on top of the GPU.
    nvme = _job(alice, "RUNNING", tres="gres/gpu:a100:1,gres/nvme:500", started=started, slurm_job_id=5108)
    assert _get(client, nvme)["cost_so_far"] == "9.50"
    # A requeued job: its earlier run is charged, its current run estimated.
    again = _job(alice, "RUNNING", started=started, slurm_job_id=5109)
    record(alice, started - timedelta(minutes=5), job=again, seconds=600, amount_gpu=Decimal("1.5"), plan="enterprise")
    body = _get(client, again)
    assert body["cost_so_far"] == "6.00"  # 1.50 charged + 1800 x 0.0025
    assert body["cost_detail"]["runs"] == 1


def test_pro_pays_nvme_beyond_its_included_cache_and_shards_draw_on_its_hours(alice, api_client_for):
    client = api_client_for(alice)
    started = NOW - timedelta(seconds=3600)
    # Three A100 shards for an hour take 3/10 x 3600 = 1080 s of the 100 included hours: $0.
    shards = _job(alice, "RUNNING", tres="gres/shard:a100:3", started=started, slurm_job_id=5120)
    body = _get(client, shards)
    assert body["cost_so_far"] == "0.00" and body["cost_detail"]["included_gpu_seconds"] == 1080
    _use_up_included_hours(alice)
    # With the hours used up: 1 A100 hour (5.40) and 700 GB of NVMe, of which Pro includes
    # 500: 200 GB x 1 h x $0.02 = 4.00.
    nvme = _job(alice, "RUNNING", tres="gres/gpu:a100:1,gres/nvme:700", started=started, slurm_job_id=5121)
    assert _get(client, nvme)["cost_so_far"] == "9.40"


def test_the_free_plan_shows_nothing_billable(alice, api_client_for):
    subscribe(alice, "free")
    job = _job(alice, "RUNNING", tres="gres/gpu:rtx4090:1", started=NOW - timedelta(seconds=900), slurm_job_id=5110)
    job.gpu_type = "rtx4090"
    job.save()
    body = _get(api_client_for(alice), job)
    assert body["cost_so_far"] == "0.00" and body["cost_detail"]["included_gpu_seconds"] == 900


def test_another_users_job_is_a_404_with_or_without_a_cost(alice, bob, api_client_for, client):
    job = _job(alice, slurm_job_id=5111)
    record(alice, NOW - timedelta(hours=1), job=job, seconds=1800)
    assert api_client_for(bob).get(f"/api/v1/jobs/{job.pk}/").status_code == 404
    client.force_login(bob)
    assert client.get(f"/jobs/{job.pk}/").status_code == 404
    assert client.get(f"/jobs/{job.pk}/summary").status_code == 404


def test_the_job_page_shows_the_cost_and_the_estimate(alice, client):
    _use_up_included_hours(alice)
    ended = _job(alice, slurm_job_id=5112)
    record(alice, NOW - timedelta(hours=1), job=ended, seconds=1800, included=600)
    running = _job(alice, "RUNNING", started=NOW - timedelta(seconds=1800), slurm_job_id=5113)
    client.force_login(alice)
    page = client.get(f"/jobs/{ended.pk}/").content.decode()
    assert 'data-field="cost">$1.80<' in page  # 1200 billable s x 0.0015
    assert "0.17 GPU-h covered by your Pro plan" in page
    summary = client.get(f"/jobs/{running.pk}/summary").content.decode()
    assert 'data-field="cost_so_far">$2.70 <span class="muted">(estimate)' in summary


def test_a_page_of_jobs_costs_the_same_queries_for_few_or_many(alice, api_client_for):
    client = api_client_for(alice)

    def jobs_and_records(count, first_id):
        for n in range(count):
            job = _job(alice, "RUNNING" if n % 2 else "COMPLETED", slurm_job_id=first_id + n)
            if n % 2 == 0:
                record(alice, NOW - timedelta(hours=1), job=job, seconds=60)

    def queries():
        with CaptureQueriesContext(connection) as captured:
            response = client.get("/api/v1/jobs/?page_size=50")
        assert response.status_code == 200
        return len(captured), response.json()

    queries()  # the API token's first use is written (once a minute after that)
    jobs_and_records(2, 6000)
    few, _ = queries()
    jobs_and_records(30, 7000)
    many, body = queries()
    assert many == few
    assert sum(job["cost"] is not None for job in body["results"]) == 16
    assert sum(job["cost_so_far"] is not None for job in body["results"]) == 16


def test_the_schema_documents_the_cost_fields(client):
    schema = client.get("/api/schema/?format=json").json()
    job = schema["components"]["schemas"]["Job"]["properties"]
    assert job["cost"]["type"] == "string" and job["cost"]["nullable"] is True
    assert job["cost_so_far"]["nullable"] is True and "estimate" in job["cost_so_far"]["description"]
    assert job["cost_detail"]["nullable"] is True
    detail = schema["components"]["schemas"]["CostDetail"]["properties"]
    assert {"included_gpu_seconds", "credit_gpu_seconds", "billable_gpu_seconds", "amount_gpu"} <= set(detail)


@pytest.mark.parametrize(
    "tres, held",
    [
        ("gres/gpu:a100:2,gres/nvme:700", {"gpu_count": 2, "nvme_gb": 700}),
        ("gres/shard:a100:3", {"gpu_count": 0, "shards": 3}),
    ],
    ids=["gpus-and-nvme", "shards"],
)
def test_the_estimate_is_what_charging_charges_for_the_run_ended_now(alice, api_client_for, tres, held):
    """Without telemetry or credits, the estimate and the charge follow the same rules: 600 s
    of included hours left, then GPUs (or shard memory) and NVMe beyond Pro's 500 GB."""
    _use_up_included_hours(alice, left_seconds=600)
    started = NOW - timedelta(seconds=2700)
    job = _job(alice, "RUNNING", tres=tres, started=started, slurm_job_id=5130)
    estimate = _get(api_client_for(alice), job)

    gpus, shards, nvme = held["gpu_count"], held.get("shards", 0), held.get("nvme_gb", 0)
    run = UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=5130,
        run_start=started,
        run_end=NOW,
        gpu_type="a100",
        user=alice,
        job=job,
        state="COMPLETED",
        seconds=2700,
        gpu_count=gpus,
        gpu_seconds=gpus * 2700,
        shards=shards,
        gpu_memory_gb_seconds=Decimal(shards * 4 * 2700),
        gpu_memory_source=UsageRecord.MemorySource.SHARDS if shards else UsageRecord.MemorySource.NONE,
        nvme_gb=nvme,
        nvme_gb_seconds=nvme * 2700,
    )
    assert charge(run.pk)
    run.refresh_from_db()
    assert Decimal(estimate["cost_so_far"]) == run.amount > 0
    detail = estimate["cost_detail"]
    assert (detail["included_gpu_seconds"], detail["billable_gpu_seconds"]) == (
        run.included_gpu_seconds,
        run.billable_gpu_seconds,
    )
    assert Decimal(detail["amount_nvme"]) == run.amount_nvme and Decimal(detail["amount_memory"]) == run.amount_memory
