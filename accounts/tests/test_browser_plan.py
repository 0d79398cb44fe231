"""In Debian's Chromium at phone width: a user pauses and resumes Pro and switches to Free from
the plan page, reached through the menu; nothing overflows the screen."""

import pytest

from plans.catalog import plan_for
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_user_pauses_resumes_and_switches_plan_on_a_phone(alice, tmp_path):
    more_changes_than_a_day_allows = {"PLAN_CHANGES_PER_DAY": "10"}
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(extra_env=more_changes_than_a_day_allows) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "alice", "pw-alice")
        page.click("label.nav-toggle-label")
        page.click("nav a:text-is('Plan')")
        expect(page.locator("h1")).to_have_text("Your plan")
        current = page.locator("[data-current-plan]")
        expect(current).to_have_attribute("data-plan-status", "active")

        page.click("[data-plan-action=pause]")
        expect(current).to_have_attribute("data-plan-status", "paused")
        expect(page.locator("body")).to_contain_text("Paused: Pro. Billed so from")
        assert plan_for(alice).is_paused
        page.click("[data-plan-action=resume]")
        expect(current).to_have_attribute("data-plan-status", "active")

        # The switch asks first, saying what it does; a "no" changes nothing.
        asked = []

        def answer(dialog, accept):
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        page.once("dialog", lambda dialog: answer(dialog, False))
        page.click("[data-plan=free] [data-plan-action=switch]")
        page.wait_for_timeout(300)
        assert plan_for(alice).code == "pro" and "billed from today" in asked[0]
        page.once("dialog", lambda dialog: answer(dialog, True))
        page.click("[data-plan=free] [data-plan-action=switch]")
        expect(current).to_have_attribute("data-current-plan", "free")
        expect(page.locator("[data-plan-action=pause]")).to_have_count(0)  # no fee, nothing to pause
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(tmp_path / "plan-phone.png"), full_page=True)
        assert errors == []
    assert plan_for(alice).code == "free"
