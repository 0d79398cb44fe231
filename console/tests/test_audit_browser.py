"""The audit page at phone width in Debian's Chromium: the filters fit the screen, the table
scrolls inside its own box, and filtering is a plain GET form."""

import pytest

from audit.log import record
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_filters_the_audit_log_on_a_phone(admin_user):
    record(admin_user, "drain", "gpu-a100-01", reason="fan noise, check the bearings", after={"flags": "DRAIN"})
    record(admin_user, "resume", "gpu-4090-02", before={"flags": "DRAIN"}, after={"flags": ""})
    with chromium_page(playwright_api, width=390, height=844) as page, daphne_server() as base_url:
        log_in(page, base_url, "ada", "pw-ada")
        page.goto(f"{base_url}/console/audit/")
        expect(page.locator("tr[data-audit-entry]:has-text('fan noise')")).to_have_count(1)
        expect(page.locator("tr[data-audit-entry]:has-text('gpu-4090-02')")).to_have_count(1)
        # Nothing makes the page itself wider than the phone; the table scrolls in .table-wrap.
        page_width, viewport = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
        assert page_width <= viewport, (page_width, viewport)
        form_box = page.locator("[data-audit-filters]").bounding_box()
        assert form_box["x"] >= 0 and form_box["x"] + form_box["width"] <= viewport

        page.select_option("select[name=action]", "resume")
        page.click("[data-audit-filters] button[type=submit]")
        page.wait_for_url("**/console/audit/?*action=resume*")
        rows = page.locator("tr[data-audit-entry]")
        expect(rows).to_have_count(1)
        expect(rows.first).to_contain_text("gpu-4090-02")
        expect(rows.first).to_contain_text("flags: DRAIN → –")
