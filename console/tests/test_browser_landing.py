"""A first visit on a phone (Chromium at 390 px): the landing page, then the sign-up form, both
styled, with a way around, and nothing wider than the screen."""

import pytest

from testing.browser import chromium_page
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_first_visit_on_a_phone_lands_and_finds_the_way_in(tmp_path):
    with chromium_page(playwright_api, width=390, height=844) as page, portal_stack() as base_url:
        page.goto(f"{base_url}/")
        expect(page.locator("h1")).to_contain_text("GPUs for your training jobs")
        expect(page.locator("header .nav a", has_text="Sign in")).to_be_visible()  # a menu, signed out too
        expect(page.locator("[data-plan=pro]")).to_contain_text("$299.00")
        expect(page.locator("[data-plan=enterprise]")).to_contain_text("credit limit")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        # Styled: the stylesheet loaded (the top bar has its background), not a bare page.
        topbar = page.evaluate("getComputedStyle(document.querySelector('.topbar')).backgroundColor")
        assert topbar != "rgba(0, 0, 0, 0)"
        page.screenshot(path=str(tmp_path / "landing-390.png"), full_page=True)
        page.locator(".hero a.button").click()
        page.wait_for_url(f"{base_url}/accounts/signup/")
        expect(page.locator("input[name=email]")).to_be_visible()
        expect(page.locator("header .nav")).to_contain_text("Sign in")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.screenshot(path=str(tmp_path / "signup-390.png"), full_page=True)
