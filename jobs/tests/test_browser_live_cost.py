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
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Running", timeout=60000)

        cost = page.locator("[data-field=cost_so_far]")
        expect(cost).to_contain_text("$", timeout=15000)
        # The page prints money to the cent ("< $0.01" for a few seconds of a 4090) with the exact
        # figure on hover (data-exact): that is what follows the clock second by second.
        exact = cost.locator("[data-exact]")
        expect(exact).to_have_count(1, timeout=15000)
        first = exact.get_attribute("data-exact")
        # Two later readings, each above the one before: the estimate follows the clock.
        expect(exact).not_to_have_attribute("data-exact", first, timeout=15000)
        second = exact.get_attribute("data-exact")
        expect(exact).not_to_have_attribute("data-exact", second, timeout=15000)
        third = exact.get_attribute("data-exact")

        def dollars(text):
            return Decimal(re.search(r"\$([\d,.]+)", text).group(1).replace(",", ""))

        assert dollars(first) < dollars(second) < dollars(third), (first, second, third)
        assert cost.inner_text().startswith(("< $0.01", "$"))
        assert page.evaluate("window.__marker") == "no reload"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        # Cancel asks first: "no" leaves the job running, "yes" cancels it.
        questions = []
        page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
        page.click("[data-cancel]")
        job_id = page.url.rstrip("/").rsplit("/", 1)[1]
        assert questions and f"Cancel job {job_id} (ticking)?" in questions[0]
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Running")
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("[data-cancel]")
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Cancelled", timeout=30000)
