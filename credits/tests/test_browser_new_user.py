"""A new user's first visit on a phone, end to end in Chromium against the real portal and
cluster: the landing page, sign-up, the e-mailed verification link, the dashboard's plan and
credits, the tutorial job from the dashboard's link with its price, watched to its end live,
what it printed, and its credits."""

import re
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from credits.tutorial import TEMPLATE_NAME
from testing.browser import chromium_page
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


def _verification_link(mail_dir: Path, address: str) -> str:
    for message in sorted(mail_dir.glob("*.log")):
        text = message.read_text()
        if address in text and "confirm-email" in text:
            return re.search(r"(/accounts/confirm-email/[^\s]+)", text).group(1)
    raise AssertionError(f"no verification mail to {address} in {mail_dir}")


def test_a_new_user_on_a_phone_signs_up_verifies_and_runs_the_tutorial(provision, tmp_path):
    mail_dir = tmp_path / "mail"
    mail = {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend", "EMAIL_FILE_PATH": str(mail_dir)}
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True, extra_env=mail) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(f"{base_url}/")
        expect(page.locator("[data-plan=free]")).to_contain_text("No monthly fee")
        page.locator(".hero a.button").click()
        page.fill("input[name=email]", "nora@example.org")
        page.fill("input[name=username]", "nora")
        page.fill("input[name=password1]", "a-long-enough-pass-77")
        page.fill("input[name=password2]", "a-long-enough-pass-77")
        page.click("main form button[type=submit]")
        page.wait_for_url(f"{base_url}/")

        page.goto(base_url + _verification_link(mail_dir, "nora@example.org"))
        page.click("main form button[type=submit]")
        page.goto(f"{base_url}/")
        expect(page.locator("p.muted strong").first).to_have_text("Free")
        expect(page.locator("[data-credit-balance-tile] .tile-figure")).to_have_text("5,000")

        provision(get_user_model().objects.get(username="nora"))  # what the worker does for a new account
        # The dashboard links the tutorial (it is on the credits page too).
        expect(page.locator("[data-first-steps] [data-tutorial-link]")).to_have_text(TEMPLATE_NAME)
        page.click("[data-first-steps] [data-tutorial-link]")
        page.wait_for_url(re.compile(r".*/jobs/new/\?template=\d+$"))
        expect(page.locator("[data-job-quote]")).to_contain_text("You would pay at most $0.00", timeout=15000)
        page.click("[data-submit]")
        page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
        page.evaluate("window.__marker = 'no reload'")
        expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Completed", timeout=120000)
        assert page.evaluate("window.__marker") == "no reload"
        # It says what it did with what the image has (the dev cluster's stand-in: no PyTorch).
        stdout = page.locator('[data-log="stdout"]')
        expect(stdout).to_contain_text("This image has no PyTorch", timeout=15000)
        expect(stdout).to_contain_text("Trained a logistic regression in plain Python on the CPU")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        page.goto(f"{base_url}/credits/")
        expect(page.locator("[data-credit-balance]")).to_contain_text("15,000", timeout=60000)
        expect(page.locator("[data-tutorial-paid]")).to_be_visible()
        assert errors == []
