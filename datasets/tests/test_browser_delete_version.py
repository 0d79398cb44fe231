"""The owner deletes a ready version from Debian's Chromium at phone width: the page asks first
(a dismissed question changes nothing), then the version shows as deleted, who did it and when."""

import pytest

from datasets.models import DatasetVersion, VersionState
from jobs.tests.test_datasets_in_jobs import _ready
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_the_owner_deletes_a_version_after_saying_yes_at_phone_width(alice, tmp_path):
    version = _ready(alice, name="corpus", size=2 * 10**9)
    with (
        playwright_api.sync_playwright() as playwright,
        portal_stack(extra_env={"DATASET_STORE": str(tmp_path / "store")}) as base_url,
    ):
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(error))
            log_in(page, base_url, "alice", "pw-alice")
            page.goto(f"{base_url}/datasets/{version.dataset_id}/")
            row = page.locator("[data-version='1']")
            expect(row.locator("[data-state]")).to_have_text("ready")
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

            page.once("dialog", lambda dialog: dialog.dismiss())
            row.locator("[data-delete-version] button").click()
            page.wait_for_timeout(500)
            assert DatasetVersion.objects.get(pk=version.pk).state == VersionState.READY

            page.once("dialog", lambda dialog: dialog.accept())
            row.locator("[data-delete-version] button").click()
            expect(page.locator("body")).to_contain_text("Version 1 is deleted")
            expect(row.locator("[data-state]")).to_have_text("deleted")
            expect(row).to_contain_text("Deleted by alice")
            assert row.locator("[data-delete-version]").count() == 0
            assert DatasetVersion.objects.get(pk=version.pk).state == VersionState.DELETED
            assert not errors, errors
        finally:
            browser.close()
