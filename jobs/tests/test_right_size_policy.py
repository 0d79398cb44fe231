"""Right-sizing by the plan: where an admin set a plan to shrink, a user whose last jobs on a GPU type all
used well under the whole GPU gets the next one-GPU job on it as the share that fits, priced as that share
and said so on the job; `keep_whole_gpu` and an advising plan keep the ask. A template is advised from the
user's last jobs of its image. CPU and host memory figures come from Slurm's accounting."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from conftest import subscribe
from jobs.costs import quote_runs
from jobs.models import Job, JobTemplate
from jobs.right_size import EVIDENCE_JOBS, standing_shrink
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from plans.models import Plan
from telemetry.models import JobEfficiency

pytestmark = pytest.mark.django_db

SPEC = {**GOOD_SPEC, "time_limit_minutes": 60}


def _ready(user, plan="pro", right_sizing="shrink"):
    Plan.objects.filter(code=plan).update(right_sizing=right_sizing)
    subscribe(user, plan)
    user.profile.cluster_username = user.username
    user.profile.provisioned_at = "2026-01-01T00:00:00Z"
    user.profile.save()


def _finished(owner, *, peak_gb, image=SPEC["image"], hours_ago=1, cpu_seconds=None, rss_mb=None):
    end = timezone.now() - timedelta(hours=hours_ago)
    job = Job.objects.create(
        owner=owner, slurm_job_id=9700 + Job.objects.count(), state="COMPLETED", exit_code=0, gpu_type="a100",
        image=image, spec={**SPEC, "image": image}, start_time=end - timedelta(minutes=30), end_time=end,
        elapsed_seconds=1800, gpu_allocation={"gpu-a100-01": [0]}, allocated_tres="cpu=4,mem=16G,gres/gpu=1",
        cpu_seconds=cpu_seconds, host_memory_peak_mb=rss_mb,
    )  # fmt: skip
    JobEfficiency.objects.create(
        job=job, computed_at=end, gpu_minutes=30, gpu_util_mean=40, gpu_util_peak=70, gpu_memory_peak_gb=peak_gb,
        gpu_memory_asked_gb=40, idle_fraction=0.1, shared_gpu=False, series=[],
    )  # fmt: skip
    return job


def _spec(user, data=SPEC):
    return parse_job_spec(data, plan=plan_for(user), policy=SpecPolicy.from_settings())


def test_a_shrinking_plan_gives_the_share_after_enough_evidence_and_prices_it_as_a_share(alice, api_client_for):
    _ready(alice)
    for peak in (3.0, 5.1, 4.0)[: EVIDENCE_JOBS - 1]:
        _finished(alice, peak_gb=peak)
    client = api_client_for(alice)
    # Two jobs are not yet a habit: the third ask is run as asked.
    first = client.post("/api/v1/jobs/", SPEC, format="json").json()
    assert first["right_sized"] is None and first["spec"]["gpu_count"] == 1
    _finished(alice, peak_gb=4.0, hours_ago=2)

    answer = client.post("/api/v1/jobs/", SPEC, format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    # The highest peak, 5.1 GB, with a quarter's headroom is 6.4 GB: two 4 GB shards of an A100.
    assert body["right_sized"]["share_gb"] == 8 and body["right_sized"]["peak_gb"] == 5.1
    assert body["right_sized"]["whole_gpu_gb"] == 40 and len(body["right_sized"]["evidence_jobs"]) == EVIDENCE_JOBS
    assert body["spec"]["gpu_memory_gb"] == 8 and "gpu_count" not in body["spec"]
    job = Job.objects.get(pk=body["id"])
    assert job.quota_shards == 2 and job.quota_gpus == 0 and "shard" in job.tres_per_node
    # Priced through the one charge split as the share it runs on, exactly as a share asked for directly;
    # less than the whole GPU, and no less than that share costs.
    as_asked = quote_runs(alice, _spec(alice), runs=1)
    share = {key: value for key, value in SPEC.items() if key != "gpu_count"} | {"gpu_memory_gb": 8}
    as_share = quote_runs(alice, _spec(alice, share), runs=1)
    as_run = quote_runs(alice, _spec(alice, job.spec), runs=1)
    assert as_run.total_text == as_share.total_text
    assert Decimal(as_run.total_text) < Decimal(as_asked.total_text)


def test_keep_whole_gpu_an_advising_plan_and_other_asks_are_left_as_asked(alice, bob, api_client_for):
    _ready(alice)
    for _ in range(EVIDENCE_JOBS):
        _finished(alice, peak_gb=3.0)
    client = api_client_for(alice)
    kept = client.post("/api/v1/jobs/", {**SPEC, "keep_whole_gpu": True}, format="json").json()
    assert kept["right_sized"] is None and kept["spec"]["gpu_count"] == 1
    # Two GPUs, a share already, or spot: not a one-whole-GPU ask.
    assert standing_shrink(alice, _spec(alice, {**SPEC, "gpu_count": 2}), plan_for(alice)) is None
    assert standing_shrink(alice, _spec(alice, {**SPEC, "spot": True}), plan_for(alice)) is None
    # A job that used most of the card breaks the habit.
    _finished(alice, peak_gb=30.0, hours_ago=0)
    assert standing_shrink(alice, _spec(alice), plan_for(alice)) is None
    # The evidence is the user's own: bob's thrifty jobs shrink nothing of his under an advising plan,
    # and nothing of alice's.
    _ready(bob, right_sizing="advise")
    for _ in range(EVIDENCE_JOBS):
        _finished(bob, peak_gb=2.0)
    assert standing_shrink(bob, _spec(bob), plan_for(bob)) is None
    assert client.post("/api/v1/jobs/", SPEC, format="json").json()["right_sized"] is None


def test_a_client_cannot_write_its_own_right_sizing(alice, api_client_for):
    _ready(alice)
    answer = api_client_for(alice).post(
        "/api/v1/jobs/", {**SPEC, "right_sized": {"share_gb": 4, "asked_gpus": 1}}, format="json"
    )
    assert answer.status_code == 400 and "right_sized" in answer.json()["errors"]
    assert not Job.objects.filter(owner=alice).exists()


def test_the_job_page_says_so_and_one_click_asks_for_the_whole_gpu_again(alice, bob):
    _ready(alice)
    for _ in range(EVIDENCE_JOBS):
        _finished(alice, peak_gb=3.0)
    browser = Client()
    browser.force_login(alice)
    form = browser.get("/jobs/new/").content.decode()
    assert "data-keep-whole-gpu" in form
    answer = browser.post("/jobs/new/", {**SPEC, "gpu_memory_gb": ""})
    job = Job.objects.filter(owner=alice).latest("pk")
    assert answer.status_code == 302 and job.right_sized["share_gb"] == 4
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-right-sized" in page and "4 GB share of a GPU, not the whole 40 GB GPU" in page
    again = browser.get(f"/jobs/new/?clone={job.pk}&whole=1").content.decode()
    assert 'name="gpu_count" inputmode="numeric" value="1"' in again
    assert 'name="gpu_memory_gb" inputmode="numeric" value=""' in again
    assert 'name="keep_whole_gpu" data-keep-whole-gpu checked' in again
    browser.post("/jobs/new/", {**SPEC, "gpu_memory_gb": "", "keep_whole_gpu": "on"})
    assert Job.objects.filter(owner=alice).latest("pk").spec["gpu_count"] == 1
    # Another user sees nothing of it.
    other = Client()
    other.force_login(bob)
    assert other.get(f"/jobs/{job.pk}/").status_code == 404
    assert other.get(f"/jobs/new/?clone={job.pk}&whole=1").status_code == 404


def test_a_template_is_advised_from_the_last_jobs_of_its_image(alice):
    _ready(alice, right_sizing="advise")
    template = JobTemplate.objects.create(owner=alice, name="train", spec=SPEC)
    browser = Client()
    browser.force_login(alice)
    for _ in range(EVIDENCE_JOBS - 1):
        _finished(alice, peak_gb=5.0)
    _finished(alice, peak_gb=1.0, image="nvcr.io/nvidia/tensorflow:24.05-tf2-py3")  # another image: not evidence
    assert "data-right-size" not in browser.get(f"/jobs/new/?template={template.pk}").content.decode()
    _finished(alice, peak_gb=5.0, hours_ago=3)
    page = browser.get(f"/jobs/new/?template={template.pk}").content.decode()
    assert "data-right-size" in page and "Your last jobs of this template's image on a100" in page
    assert f'href="?template={template.pk}&amp;share=8"' in page
    accepted = browser.get(f"/jobs/new/?template={template.pk}&share=8").content.decode()
    assert 'name="gpu_memory_gb" inputmode="numeric" value="8"' in accepted and "data-right-size" not in accepted


def test_cpu_and_host_memory_figures_come_from_the_accounting(alice, api_client_for):
    _ready(alice)
    job = _finished(alice, peak_gb=3.0, cpu_seconds=3600, rss_mb=6 * 1024)
    figures = api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/").json()["efficiency"]
    # 3600 CPU-seconds over 1800 s on 4 CPUs: half of their time.
    assert figures["cpu_efficiency"] == 0.5
    assert (figures["host_memory_peak_gb"], figures["host_memory_asked_gb"]) == (6.0, 16.0)
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "50 % of its CPUs" in page and "6.0 GB at most of the 16.0 GB allocated" in page
    unsampled = _finished(alice, peak_gb=3.0)
    figures = api_client_for(alice).get(f"/api/v1/jobs/{unsampled.pk}/").json()["efficiency"]
    assert figures["cpu_efficiency"] is None and figures["host_memory_peak_gb"] is None
