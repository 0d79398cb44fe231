"""A new user's dashboard in Debian's Chromium at phone width: right after sign-up it says what
verifying the address brings (the campaign's amount) and links the tutorial, whose form opens
filled; once verified, the dashboard says so and the credits are in the balance."""

import re

import pytest

from credits.actions.grants import default_campaign
from credits.models import Campaign
from credits.tutorial import TEMPLATE_NAME
from testing.browser import chromium_page
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_new_users_dashboard_names_the_verification_credits_and_the_tutorial(tmp_path):
    Campaign.objects.filter(pk=default_campaign().pk).update(signup_gpu_seconds=6000, tutorial_gpu_seconds=11000)
    mail = {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend", "EMAIL_FILE_PATH": str(tmp_path)}
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(extra_env={**mail, "ACCOUNT_EMAIL_VERIFICATION": "optional"}) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(f"{base_url}/accounts/signup/")
        page.fill("input[name=email]", "nora@example.org")
        page.fill("input[name=username]", "nora")
        page.fill("input[name=password1]", "a-long-enough-pass-77")
        page.fill("input[name=password2]", "a-long-enough-pass-77")
        page.click("main form button[type=submit]")
        page.wait_for_url(f"{base_url}/")

        steps = page.locator("[data-first-steps]")
        expect(steps.locator("[data-signup-credits]")).to_have_text("6,000 credits")
        expect(steps.locator("[data-tutorial-credits]")).to_have_text("11,000 more credits")
        expect(steps.locator("[data-tutorial-link]")).to_have_text(TEMPLATE_NAME)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(tmp_path / "dashboard-new-user.png"), full_page=True)

        steps.locator("[data-tutorial-link]").click()
        page.wait_for_url(re.compile(r".*/jobs/new/\?template=\d+$"))
        assert page.input_value("#id_command").startswith(f'echo "{TEMPLATE_NAME}"')

        sent = "".join(path.read_text() for path in tmp_path.iterdir() if path.suffix == ".log")
        page.goto(base_url + re.search(r"(/accounts/confirm-email/\S+)", sent).group(1))
        page.click("main form button[type=submit]")
        page.goto(f"{base_url}/")
        expect(page.locator('[data-step="verify"]')).to_contain_text("verified: its credits are in your balance")
        expect(page.locator("[data-credit-balance-tile] .tile-figure")).to_have_text("6,000")
        expect(page.locator("[data-tutorial-link]")).to_be_visible()
        assert errors == []
