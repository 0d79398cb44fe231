"""An admin pins a dataset version to a node from Debian's Chromium at phone width: from the
dataset's page to the pin page, one node checked, the pin shown with its staging job, then
unpinned; the owner never sees the link."""

import pytest

from cluster.models import Node
from datasets.models import NodePin
from jobs.tests.test_datasets_in_jobs import _provisioned, _ready
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_pins_and_unpins_a_version_at_phone_width(alice, admin_user, tmp_path):
    Node.objects.create(name="gpu-a100-01", state="IDLE", nvme_gb=10)
    Node.objects.create(name="gpu-a100-02", state="IDLE", nvme_gb=10)
    _provisioned(admin_user)
    version = _ready(alice, name="corpus", size=2 * 10**9)
    store = {"DATASET_STORE": str(tmp_path / "store")}
    with playwright_api.sync_playwright() as playwright, portal_stack(extra_env=store) as base_url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        try:
            context = browser.new_context(viewport={"width": 390, "height": 844})
            page = context.new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(error))
            log_in(page, base_url, "alice", "pw-alice")
            page.goto(f"{base_url}/datasets/{version.dataset_id}/")
            expect(page.locator("[data-version='1']")).to_be_visible()
            assert page.locator("[data-pin-link]").count() == 0  # the owner pins nothing

            page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            page.on("pageerror", lambda error: errors.append(error))
            log_in(page, base_url, "ada", "pw-ada")
            page.goto(f"{base_url}/datasets/{version.dataset_id}/")
            page.click("[data-pin-link]")
            row = page.locator("[data-pin-node='gpu-a100-02']")
            row.locator("input[name=node]").check()
            page.click("[data-pin-form] button[type=submit]")
            expect(page.locator("body")).to_contain_text("corpus v1 pinned on gpu-a100-02")
            expect(row.locator("[data-pinned]")).to_contain_text("by ada")
            expect(row.locator("[data-staging]")).to_contain_text("Submitting")  # the state in words
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert list(NodePin.objects.values_list("node", flat=True)) == ["gpu-a100-02"]

            page.click("text=Unpin from gpu-a100-02")
            expect(page.locator("body")).to_contain_text("Unpinned from gpu-a100-02")
            assert not NodePin.objects.exists()
            assert not errors, errors
        finally:
            browser.close()
