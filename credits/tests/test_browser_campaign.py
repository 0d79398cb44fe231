"""In Debian's Chromium at phone width: marketing creates a campaign on the console, a new
person signs up through its link, and the campaign page shows the sign-up."""

import re

import pytest

from credits.models import Enrollment
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_marketing_creates_a_campaign_and_sees_a_sign_up_through_its_link(marketer, tmp_path):
    with chromium_page(playwright_api, width=390, height=844) as page, portal_stack() as base_url:
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "mark", "pw-mark")
        page.goto(f"{base_url}/marketing/campaigns/")
        form = page.locator("[data-campaign-form]")
        form.locator("#id_name").fill("Winter GPUs")
        form.locator("#id_code").fill("winter")
        form.locator("#id_start").fill("2026-01-01T00:00")
        form.locator("#id_budget_gpu_seconds").fill("1000000")
        form.locator("#id_per_referrer_cap").fill("3")
        form.locator("button[type=submit]").click()
        page.wait_for_url(re.compile(r".*/marketing/campaigns/\d+/$"))
        campaign_url = page.url
        link = page.locator("[data-campaign-link]").inner_text()
        assert link.endswith("/r/winter")
        expect(page.locator("[data-figure=signups]")).to_have_text("0")

        page.context.clear_cookies()  # signed out: a stranger opens the link
        page.goto(link)
        expect(page.locator("h1")).to_have_text("Winter GPUs")
        page.click("[data-signup]")
        page.wait_for_url(re.compile(r".*/accounts/signup/$"))
        page.fill("#id_email", "newcomer@example.org")
        page.fill("#id_username", "newcomer")
        page.fill("#id_password1", "a-long-pass-phrase-1")
        page.fill("#id_password2", "a-long-pass-phrase-1")
        page.click("form button[type=submit]")
        page.wait_for_url(re.compile(r".*/(accounts/confirm-email/)?$"))
        assert Enrollment.objects.get(user__username="newcomer").campaign.code == "winter"

        page.context.clear_cookies()
        log_in(page, base_url, "mark", "pw-mark")
        page.goto(campaign_url)
        expect(page.locator("[data-figure=signups]")).to_have_text("1")
        expect(page.locator("[data-member=newcomer]")).to_be_visible()
        expect(page.locator("#marketing-chart .main-svg").first).to_be_attached()
        page.screenshot(path=str(tmp_path / "campaign-phone.png"), full_page=True)
        assert errors == []
