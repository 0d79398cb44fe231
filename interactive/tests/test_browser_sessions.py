"""In Chromium, as a user would: "New notebook", watch it queue and start (pushed, no reload), open
JupyterLab through the portal, run a cell that prints CUDA_VISIBLE_DEVICES, leave it idle and see it
warned and stopped, in the notebook and on the portal's page (at phone width)."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from interactive.actions.culling import cull_idle_sessions
from interactive.models import InteractiveSession
from testing.browser import chromium_page, log_in
from testing.servers import free_port, portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


def test_a_notebook_starts_runs_a_cell_and_is_stopped_when_left_idle(alice, provision, settings):
    provision(alice)
    port = free_port()
    site = f"http://127.0.0.1:{port}"
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(worker=True, beat=True, port=port, extra_env={"SITE_URL": site}) as base_url,
    ):
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/sessions/")
        page.click("text=New notebook")
        page.select_option("#id_gpu_type", "rtx4090")
        page.click("[data-start-session]")
        page.wait_for_url(re.compile(r".*/sessions/\d+/$"))
        session = InteractiveSession.objects.get(owner=alice)
        page.evaluate("window.__marker = 'no reload'")
        label = page.locator("[data-session-state-label]")
        expect(label).to_have_text(re.compile("Queued|Starting|Ready"))
        expect(label).to_have_text("Ready", timeout=90000)
        assert page.evaluate("window.__marker") == "no reload"  # pushed, not reloaded
        # "JupyterLab requested" went once the session moved on; the page says Ready alone.
        expect(page.locator(".messages")).not_to_contain_text("requested")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

        # Shown when it fails: what the notebook asked the proxy for and did not get.
        page.context.on("response", lambda response: response.status >= 400 and print(response.status, response.url))
        with page.context.expect_page() as opened:
            page.click("[data-open-session]")
        lab = opened.value
        lab.set_viewport_size({"width": 1280, "height": 900})
        lab.wait_for_url(re.compile(rf"http://s-{session.host_key}\.sessions\.localhost:{port}/lab.*"), timeout=60000)
        lab.locator(".jp-LauncherCard[data-category='Notebook']").first.click(timeout=60000)
        # As a user does: the status bar says the kernel is idle before a cell is run (JupyterLab
        # may start a kernel and replace it while the notebook opens).
        expect(lab.get_by_text(re.compile(r"Python 3 \(ipykernel\) \| Idle"))).to_be_visible(timeout=90000)
        editor = lab.locator(".jp-Notebook .jp-Cell .cm-content").first
        editor.click(timeout=60000)
        editor.type("import os; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'])")
        lab.keyboard.press("Shift+Enter")
        expect(lab.locator(".jp-OutputArea-output").first).to_contain_text("gpus=0", timeout=60000)

        # Half an hour later with nothing run: a warning on the notebook and on the portal's page.
        later = timezone.now() + timedelta(minutes=31)
        assert cull_idle_sessions(now=later)["warned"] == 1
        expect(lab.locator("[data-gpupool-notice]")).to_contain_text("idle", timeout=30000)
        expect(page.locator("[data-idle-warning]")).to_be_visible(timeout=30000)
        # Still idle when the warning runs out: stopped, and both pages say so.
        assert cull_idle_sessions(now=later + timedelta(seconds=settings.SESSION_IDLE_WARNING_SECONDS))["stopped"] == 1
        expect(label).to_have_text("Stopped", timeout=60000)
        expect(page.locator("[data-session-progress]")).to_contain_text("after being idle")
        expect(lab.locator("[data-gpupool-notice]")).to_contain_text("stopped after being idle", timeout=30000)
        assert page.evaluate("window.__marker") == "no reload"
