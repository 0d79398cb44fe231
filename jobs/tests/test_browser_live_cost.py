"""A running job's "Cost so far" follows the clock on the open page, with no reload, and cancelling
it asks first (Chromium at phone width, the real portal and cluster)."""

import re
from decimal import Decimal

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


def test_the_cost_so_far_ticks_while_the_job_runs(alice, provision):
    provision(alice)  # Pro: no included RTX 4090 hours, so every second is billable
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        fill_job_form(page, base_url, name="ticking", command="sleep 60")
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator("dl.facts [data-field=state]")).to_have_text("RUNNING", timeout=60000)

        cost = page.locator("[data-field=cost_so_far]")
        expect(cost).to_contain_text("$", timeout=15000)
        first = cost.inner_text()
        # Two later readings, each above the one before: the estimate follows the clock.
        expect(cost).not_to_have_text(first, timeout=15000)
        second = cost.inner_text()
        expect(cost).not_to_have_text(second, timeout=15000)
        third = cost.inner_text()

        def dollars(text):
            return Decimal(re.search(r"\$([\d,.]+)", text).group(1).replace(",", ""))

        assert dollars(first) < dollars(second) < dollars(third), (first, second, third)
        assert page.evaluate("window.__marker") == "no reload"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        # Cancel asks first: "no" leaves the job running, "yes" cancels it.
        questions = []
        page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
        page.click("[data-cancel]")
        assert questions and "Cancel job ticking?" in questions[0]
        expect(page.locator("dl.facts [data-field=state]")).to_have_text("RUNNING")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("[data-cancel]")
        expect(page.locator("dl.facts [data-field=state]")).to_have_text("CANCELLED", timeout=30000)
