"""A researcher in Debian's Chromium at phone width reads how a finished job used its GPUs (figures
and chart), clones it, and takes the offered share of a GPU with one click."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.tests.test_right_size import SPEC
from telemetry.models import JobEfficiency
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_researcher_reads_the_efficiency_and_clones_on_the_share_that_fits(alice):
    end = timezone.now() - timedelta(hours=1)
    job = Job.objects.create(
        owner=alice, name="train", slurm_job_id=9901, state="COMPLETED", exit_code=0, gpu_type="a100", spec=SPEC,
        start_time=end - timedelta(minutes=30), end_time=end, elapsed_seconds=1800,
        gpu_allocation={"gpu-a100-01": [0]},
    )  # fmt: skip
    series = [[(end - timedelta(minutes=30 - m)).isoformat(), 40.0 + m, 5.0] for m in range(30)]
    JobEfficiency.objects.create(
        job=job, computed_at=end, gpu_minutes=30, gpu_util_mean=54.5, gpu_util_peak=69, gpu_memory_peak_gb=5.1,
        gpu_memory_asked_gb=40, idle_fraction=0.1, series=series,
    )  # fmt: skip
    with chromium_page(playwright_api, width=390, height=844) as page, daphne_server() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/jobs/{job.pk}/")
        section = page.locator("[data-efficiency]")
        expect(section.locator("[data-util-mean]")).to_contain_text("55 % on average")
        expect(section.locator("[data-memory-peak]")).to_contain_text("5.1 GB at most of the 40 GB asked")
        expect(section.locator("[data-efficiency-plot] .main-svg").first).to_be_visible()
        width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= viewport, (width, viewport)

        page.click("[data-clone]")
        page.wait_for_url(re.compile(r".*/jobs/new/\?clone=\d+$"))
        offer = page.locator("[data-right-size]")
        expect(offer).to_contain_text("used at most 5.1 GB of the 40 GB GPU")
        page.click("[data-accept-share]")
        expect(page.locator("#id_gpu_memory_gb")).to_have_value("8")
        expect(page.locator("#id_gpu_count")).to_have_value("")
        expect(page.locator("[data-right-size]")).to_have_count(0)


def test_a_right_sized_job_says_so_and_one_click_asks_for_the_whole_gpu_again(alice):
    from plans.models import Plan

    Plan.objects.filter(code="pro").update(right_sizing="shrink")
    shared = {key: value for key, value in SPEC.items() if key != "gpu_count"} | {"gpu_memory_gb": 8}
    job = Job.objects.create(
        owner=alice, name="train", slurm_job_id=9902, state="PENDING", gpu_type="a100", spec=shared,
        right_sized={"asked_gpus": 1, "whole_gpu_gb": 40, "share_gb": 8, "peak_gb": 5.1, "evidence_jobs": [1, 2, 3],
                     "plan": "pro"},
    )  # fmt: skip
    with chromium_page(playwright_api, width=390, height=844) as page, daphne_server() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/jobs/{job.pk}/")
        notice = page.locator("[data-right-sized]")
        expect(notice).to_contain_text("8 GB share of a GPU, not the whole 40 GB GPU")
        expect(notice).to_contain_text("Your last 3 jobs on a100 used at most 5.1 GB")
        width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert width <= viewport, (width, viewport)
        page.click("[data-ask-whole]")
        page.wait_for_url(re.compile(r".*/jobs/new/\?clone=\d+&whole=1$"))
        expect(page.locator("#id_gpu_count")).to_have_value("1")
        expect(page.locator("#id_gpu_memory_gb")).to_have_value("")
        expect(page.locator("[data-keep-whole-gpu]")).to_be_checked()
