"""A dataset uploaded from Debian's Chromium at phone width: the upload is cut off after its
first 8 MiB chunk (every later PATCH fails as a dropped connection), the page is reloaded, the
same file chosen again, and the upload resumes at the server's offset, not at 0; the worker
verifies it and the page shows the version ready with its sha256."""

import hashlib
import os
import re
import time
from contextlib import contextmanager

import pytest

from datasets import actions
from datasets.manifest import manifest_sha256
from datasets.models import Upload
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHUNK = 8 * 1024 * 1024


def _wait_for(condition, page, seconds=30):
    """Polls the database; waits through Playwright, whose sync API runs route handlers only
    while the test is inside one of its calls."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        page.wait_for_timeout(200)
    raise AssertionError(f"timed out; the page says: {page.locator('[data-status]').text_content()}")


@contextmanager
def _dataset_page(dataset, tmp_path):
    """alice signed in on the dataset's page in Chromium at phone width, the portal (web process and a
    worker) on a dataset store of the test's own; yields the page and its script errors."""
    store = {"DATASET_STORE": str(tmp_path / "store")}
    with playwright_api.sync_playwright() as playwright, portal_stack(worker=True, extra_env=store) as base_url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport={"width": 390, "height": 844}).new_page()
            errors = []
            page.on("pageerror", lambda error: errors.append(error))
            log_in(page, base_url, "alice", "pw-alice")
            page.goto(f"{base_url}/datasets/{dataset.pk}/")
            yield page, errors
        finally:
            browser.close()


def test_an_interrupted_upload_resumes_after_a_reload_and_is_ready(alice, tmp_path):
    dataset = actions.create_dataset(alice, name="browser-data")
    # DATASET_BROWSER_TEST_MB=1000 for the 1 GB (minutes); the suite's default is 20 MB.
    megabytes = int(os.environ.get("DATASET_BROWSER_TEST_MB", "20"))
    data = os.urandom(megabytes * 1000 * 1000)
    source = tmp_path / "shard-000.bin"
    source.write_bytes(data)
    expected = manifest_sha256([("shard-000.bin", len(data), hashlib.sha256(data).hexdigest())])
    with _dataset_page(dataset, tmp_path) as (page, errors):
        # The connection drops after the first chunk: every later PATCH fails.
        patches = []

        def drop_after_first(route):
            if route.request.method == "PATCH":
                patches.append(route.request.headers.get("upload-offset"))
                if len(patches) > 1:
                    route.abort("connectionreset")
                    return
            route.continue_()

        page.route("**/uploads/**", drop_after_first)
        page.set_input_files("[data-files]", str(source))
        page.click("[data-start]")
        _wait_for(lambda: Upload.objects.filter(offset=CHUNK).exists(), page)
        _wait_for(lambda: len(patches) > 1, page)  # the client has met the dropped connection
        assert Upload.objects.get().state == Upload.State.RECEIVING
        # The first chunk's progress: the rate and the time left ("8.4 of 20.0 MB · … MB/s · … left").
        expect(page.locator("[data-status]")).to_contain_text(re.compile(rf"of {megabytes}\.0 MB · .* left"))

        # Reloaded while the connection is still down, so the old page's retries die with it.
        page.reload()
        page.unroute("**/uploads/**")
        stood_at = Upload.objects.get().offset
        assert stood_at == CHUNK
        expect(page.locator("[data-resume-note]")).to_contain_text("Version 1 is still open")
        resumed = []
        page.on(
            "request",
            lambda request: request.method == "PATCH" and resumed.append(request.headers.get("upload-offset")),
        )
        page.set_input_files("[data-files]", str(source))
        page.click("[data-start]")
        expect(page.locator("tr[data-version='1'] [data-state]")).to_have_text("ready", timeout=60000 + megabytes * 300)
        assert resumed[0] == str(stood_at)  # from the server's offset, not from 0
        expect(page.locator("tr[data-version='1'] [data-sha256]")).to_have_text(expected)
        page.screenshot(path=str(tmp_path / "datasets-phone.png"), full_page=True)
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390 + 1, width
        assert errors == []


def test_the_files_of_a_folder_go_two_at_a_time_and_make_one_ready_version(alice, tmp_path):
    """Three files of three chunks each: the second file's upload is declared while the first
    is still sending (two connections), and the version holds all three with their sha256."""
    dataset = actions.create_dataset(alice, name="shards")
    files = {f"shard-{index}.bin": os.urandom(3 * CHUNK - 1000) for index in range(3)}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    expected = manifest_sha256([(name, len(data), hashlib.sha256(data).hexdigest()) for name, data in files.items()])
    with _dataset_page(dataset, tmp_path) as (page, errors):
        requests = []
        page.on(
            "request",
            lambda request: (
                "/uploads/" in request.url and requests.append((request.method, request.url.rsplit("/uploads/", 1)[1]))
            ),
        )
        expect(page.locator("[data-live-part='versions']")).to_contain_text("No versions yet.")
        page.evaluate("window.notReloaded = true")
        page.set_input_files("[data-files]", [str(tmp_path / name) for name in files])
        page.click("[data-start]")
        expect(page.locator("tr[data-version='1'] [data-state]")).to_have_text("ready", timeout=90000)
        expect(page.locator("tr[data-version='1'] [data-sha256]")).to_have_text(expected)
        # The table followed the upload in place: the page was never reloaded, and says when it read.
        assert page.evaluate("window.notReloaded") is True
        expect(page.locator("[data-live-part='versions']")).not_to_contain_text("No versions yet.")
        expect(page.locator("[data-live-updated]")).to_contain_text("Updated")
        expect(page.locator("[data-status]")).to_contain_text("Version 1 is ready")
    creations = [index for index, (method, _url) in enumerate(requests) if method == "POST"]
    first_upload = next(url for method, url in requests if method == "PATCH")
    last_patch_of_first = max(index for index, (method, url) in enumerate(requests) if url == first_upload)
    assert len(creations) == 3 and creations[1] < last_patch_of_first, requests


def test_a_large_file_goes_as_parts_at_once_resumes_them_after_a_reload_and_is_joined(alice, tmp_path):
    """A file of 64 MiB or more: two partial uploads sent at once, cut off after two chunks,
    the page reloaded, the same file chosen again: the parts resume where the server stands
    (no new part is declared), the final upload joins them, and the version holds the file."""
    dataset = actions.create_dataset(alice, name="large")
    data = os.urandom(9 * CHUNK)
    (tmp_path / "big.bin").write_bytes(data)
    expected = manifest_sha256([("big.bin", len(data), hashlib.sha256(data).hexdigest())])
    with _dataset_page(dataset, tmp_path) as (page, errors):
        sent = []

        def cut_after_two_chunks(route):
            request = route.request
            sent.append((request.method, request.headers.get("upload-concat", "")))
            if request.method == "PATCH" and sum(method == "PATCH" for method, _ in sent) > 2:
                route.abort("connectionreset")
                return
            route.continue_()

        page.route("**/uploads/**", cut_after_two_chunks)
        page.set_input_files("[data-files]", str(tmp_path / "big.bin"))
        page.click("[data-start]")
        _wait_for(lambda: sum(u.offset for u in Upload.objects.filter(partial=True)) >= 2 * CHUNK, page)
        _wait_for(lambda: sum(method == "PATCH" for method, _ in sent) > 3, page)
        declared = [concat for method, concat in sent if method == "POST"]
        assert declared == ["partial", "partial"], sent
        parts = {upload.pk: upload.offset for upload in Upload.objects.filter(partial=True)}

        page.reload()
        page.unroute("**/uploads/**")
        after = []
        page.on(
            "request",
            lambda request: (
                "/uploads/" in request.url
                and after.append((request.method, request.headers.get("upload-concat", ""), request.url))
            ),
        )
        page.set_input_files("[data-files]", str(tmp_path / "big.bin"))
        page.click("[data-start]")
        expect(page.locator("tr[data-version='1'] [data-state]")).to_have_text("ready", timeout=120000)
        expect(page.locator("tr[data-version='1'] [data-sha256]")).to_have_text(expected)
        assert errors == []
    # Resumed, not sent again: the only declaration after the reload is the final one, naming both parts.
    posts = [(concat, url) for method, concat, url in after if method == "POST"]
    assert len(posts) == 1 and posts[0][0].startswith("final;"), after
    assert all(str(pk) in posts[0][0] for pk in parts), (posts, parts)
    # Joined: the parts are spent (abandoned, their bytes removed) and the version holds one file.
    assert set(Upload.objects.filter(partial=True).values_list("state", flat=True)) == {Upload.State.ABANDONED}
    assert Upload.objects.get(partial=False).path == "big.bin"
