"""A researcher reads what a finished job wrote: lists its files, previews its metrics and its
plot, and downloads its checkpoint (Chromium at phone width, the real portal and cluster)."""

import re

import pytest

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

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
COMMAND = (
    "mkdir -p checkpoints && head -c 100000 /dev/zero > checkpoints/model-final.pt && "
    "printf 'epoch,loss\\n1,0.91\\n2,0.42\\n' > metrics.csv && "
    f"echo {PNG} | base64 -d > plot.png && echo trained"
)


def test_a_finished_jobs_checkpoint_metrics_and_plot(alice, provision, tmp_path):
    provision(alice)
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        fill_job_form(page, base_url, name="writes-files", command=COMMAND)
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Completed", timeout=90000)

        page.click("[data-files-link]")
        expect(page.locator("[data-file='checkpoints'] a")).to_be_visible()
        expect(page.locator("[data-file='metrics.csv']")).to_be_visible()
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        page.click("[data-file='metrics.csv'] a:not([data-download])")
        expect(page.locator("[data-preview-text]")).to_contain_text("2,0.42")
        page.go_back()
        page.click("[data-file='plot.png'] a:not([data-download])")
        image = page.locator("[data-preview-image]")
        expect(image).to_be_visible()
        page.wait_for_function("document.querySelector('[data-preview-image]').naturalWidth === 1")

        page.go_back()
        page.click("[data-file='checkpoints'] a")
        with page.expect_download() as download:
            page.click("[data-file='checkpoints/model-final.pt'] [data-download]")
        saved = tmp_path / "model-final.pt"
        download.value.save_as(saved)
        assert download.value.suggested_filename == "model-final.pt"
        assert saved.read_bytes() == b"\0" * 100000
