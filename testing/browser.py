"""Browser tests' shared steps (Playwright's sync API on Debian's Chromium)."""

from __future__ import annotations

import os
from contextlib import contextmanager

from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH

# Playwright's sync API keeps an event loop on the test's thread; the ORM calls in the tests
# are plain synchronous code, not code running inside that loop.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


@contextmanager
def chromium_page(playwright_api, *, width: int = 1280, height: int = 900, time_zone: str | None = None):
    with playwright_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": width, "height": height}, timezone_id=time_zone)
        finally:
            browser.close()


def log_in(page, base_url: str, username: str, password: str) -> None:
    page.goto(f"{base_url}/accounts/login/")
    page.fill("input[name=login]", username)
    page.fill("input[name=password]", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/")


def fill_job_form(page, base_url: str, *, name: str, command: str, gpu_type: str = "rtx4090", minutes: int = 5) -> None:
    """Open the new-job form and fill it for one GPU of `gpu_type` (the submit is the caller's)."""
    page.goto(f"{base_url}/jobs/new/")
    page.fill("#id_name", name)
    page.fill("#id_image", "nvcr.io/nvidia/pytorch:24.05-py3")
    page.select_option("#id_gpu_type", gpu_type)
    page.fill("#id_gpu_count", "1")
    page.fill("#id_command", command)
    page.fill("#id_time_limit_minutes", str(minutes))
