"""The real thing end to end: Chromium, the web process, Redis and PostgreSQL."""

import re
import threading
from datetime import UTC, datetime

import pytest
from django.db import transaction

from jobs.live.events import publish_job_update
from jobs.models import Job
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def browser_page():
    # A phone, in a zone other than the portal's: the pages follow the browser's.
    with chromium_page(playwright_api, width=390, height=844, time_zone="Asia/Kolkata") as page:
        yield page


def test_log_in_and_see_a_job_change_state_without_reloading(browser_page, alice):
    page = browser_page
    job = Job.objects.create(owner=alice, slurm_job_id=7001, name="train-resnet", state="PENDING")
    with daphne_server() as base_url:
        log_in(page, base_url, "alice", "pw-alice")
        assert page.locator("h1").inner_text() == "Dashboard"

        page.goto(f"{base_url}/jobs/")
        page.wait_for_selector("[data-live-indicator].live-ok", timeout=10000)
        row_state = page.locator(f'tr[data-job-id="{job.pk}"] [data-field=state_label]')
        assert row_state.inner_text() == "Pending"
        page.evaluate("window.__marker = 'same page'")

        with transaction.atomic():
            Job.objects.filter(pk=job.pk).update(
                state="RUNNING", nodes="gpu-a100-01", start_time=datetime(2026, 12, 7, 8, 5, tzinfo=UTC)
            )
        # Playwright's sync API runs an event loop on this thread, where async_to_sync
        # refuses to run; the mirror publishes from a worker thread like this one.
        publisher = threading.Thread(target=publish_job_update, args=(job.pk,))
        publisher.start()
        publisher.join()
        playwright_api.expect(row_state).to_have_text("Running", timeout=10000)
        assert page.locator(f'tr[data-job-id="{job.pk}"] [data-field=nodes]').inner_text() == "gpu-a100-01"
        assert page.evaluate("window.__marker") == "same page"  # no reload happened
        # 08:05 UTC is 13:35 in Kolkata: written by the script as the server writes it, and the
        # server, told the browser's zone by its cookie, writes the same after a reload.
        started = page.locator(f'tr[data-job-id="{job.pk}"] [data-field=start_time]')
        assert started.inner_text() == "7 Dec 2026, 13:35"
        page.reload()
        assert started.inner_text() == "7 Dec 2026, 13:35"
        assert re.search(r"Times are in Asia/(Kolkata|Calcutta)", page.locator("footer").inner_text())
