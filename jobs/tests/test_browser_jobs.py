"""A researcher's loop in Debian's Chromium: submit, watch it run and finish, read the
logs, clone. The real portal (web process, worker, beat) on the real cluster."""

import re

import pytest

from jobs.models import Job
from testing.browser import chromium_page, fill_job_form, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_submit_watch_read_logs_and_clone(alice, provision, tmp_path, width, height):
    provision(alice)
    with (
        chromium_page(playwright_api, width=width, height=height) as page,
        portal_stack(worker=True, beat=True) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        errors = []
        page.on("pageerror", lambda error: errors.append(error))

        fill_job_form(page, base_url, name="browser-run", command="sleep 8\necho browser says hi")
        # The most the job can cost for its time limit, from the billing quote API.
        expect(page.locator("[data-job-quote]")).to_contain_text("$", timeout=15000)
        # ... and what of it the plan's hours and the credits would cover (here: nothing).
        expect(page.locator("[data-job-quote]")).to_contain_text("covered by your plan or credits")
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        page.evaluate("window.__marker = 'no reload'")

        state = page.locator("dl.facts [data-field=state_label]")
        expect(state).to_have_text("Running", timeout=60000)
        expect(state).to_have_text("Completed", timeout=60000)
        expect(page.locator('[data-log="stdout"]')).to_contain_text("browser says hi", timeout=15000)
        # Everything the page shows follows the job, not only the state badge.
        job = Job.objects.get(name="browser-run", owner=alice)
        # Headed by the portal's id (Slurm's repeats across clusters), Slurm's id as a detail.
        expect(page.locator("[data-field=title]")).to_contain_text(f"Job {job.pk}")
        expect(page.locator("[data-slurm-id]")).to_contain_text(f"job {job.slurm_job_id} on {job.cluster}")
        expect(page.locator("[data-field=submit_time]")).not_to_have_text("—")
        expect(page.locator("[data-field=exit_code]")).to_have_text("0", timeout=15000)
        expect(page.locator("[data-field=accounting]")).to_contain_text("s × 1 GPU", timeout=30000)
        expect(page.locator("[data-cancel]")).to_have_count(0)
        assert page.evaluate("window.__marker") == "no reload"
        assert errors == []
        page.screenshot(path=str(tmp_path / f"job-{width}.png"), full_page=True)

        page.click("[data-clone]")
        page.wait_for_url(re.compile(r".*/jobs/new/\?clone=\d+$"))
        assert page.input_value("#id_image") == "nvcr.io/nvidia/pytorch:24.05-py3"
        assert page.input_value("#id_command") == "sleep 8\necho browser says hi"
        assert page.input_value("#id_gpu_type") == "rtx4090"
        assert page.input_value("#id_name") == "browser-run"
    assert Job.objects.get(name="browser-run", owner=alice).state == "COMPLETED"


def test_a_refused_spec_shows_field_errors_and_creates_nothing(alice, provision):
    provision(alice)
    with chromium_page(playwright_api, width=390, height=844) as page, portal_stack() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/jobs/new/")
        page.fill("#id_image", "pytorch/pytorch:latest")
        page.fill("#id_command", "python train.py")
        page.click("[data-submit]")
        expect(page.locator(".field-error").first).to_contain_text("latest")
        assert page.input_value("#id_command") == "python train.py"  # what was typed is kept
    assert Job.objects.count() == 0
