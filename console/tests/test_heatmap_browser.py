"""The heatmap in Debian's Chromium: one cell per GPU, a tooltip on hover, a click to the
GPU page and its chart. With SAVE_DOCS_SCREENSHOTS=1 it also saves docs/heatmap.png for the README."""

import os
import shutil
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client
from jobs.models import Job
from jobs.tasks import run_sync
from telemetry.actions.storage import store_samples
from telemetry.emulator import emulated_samples
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack
from testing.slurm import submission, wait_for, wait_for_state

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


def test_heatmap_cells_tooltip_and_drill_down(alice, provision, tmp_path):
    profile = provision(alice)
    client = rest_client(profile.cluster_username)
    job_ids = [
        client.submit_job(submission("sleep 120", tres_per_node=tres, name=name))
        for tres, name in [
            ("gres/gpu:a100:2", "llm-finetune"),
            ("gres/gpu:rtx4090:1", "resnet50"),
            ("gres/shard:a100:3", "notebook"),
        ]
    ]
    for job_id in job_ids:
        wait_for_state(client, job_id, {"RUNNING"})
    wait_for(lambda: run_sync() and Job.objects.filter(state="RUNNING").count() == 3, what="the mirror")
    mirror_nodes(rest_client())
    store_samples(emulated_samples(timezone.now()), source="emulator")
    with chromium_page(playwright_api, width=1280, height=800) as page, portal_stack() as base_url:
        log_in(page, base_url, "alice", "pw-alice")

        page.goto(f"{base_url}/console/heatmap/")
        cells = page.locator(".hm-cell")
        expect(cells).to_have_count(18)  # 2x4 rtx4090 + 2x4 a100 + 1x2 h100
        assert page.locator("button.metric").first.get_attribute("title").startswith("Compute utilisation")
        expect(page.locator("[data-emulated]")).to_be_visible()

        busy = page.locator(".hm-cell.hm-busy").first
        busy.hover()
        tip = page.locator("#heatmap-tip")
        expect(tip).to_be_visible()
        expect(tip).to_contain_text("Compute:")
        expect(tip).to_contain_text("(yours)")
        page.screenshot(path=str(tmp_path / "heatmap.png"), full_page=True)
        page.click("button.metric[data-metric='1']")
        expect(page.locator("[data-metric-help]")).to_contain_text("Memory utilisation")

        page.locator('.hm-cell[data-n="2"][data-g="1"]').click()
        page.wait_for_url(f"{base_url}/console/nodes/*/gpus/1/")
        page.wait_for_selector("#chart-hour .main-svg", timeout=15000)
        page.wait_for_selector("#chart-day .main-svg", timeout=15000)
        assert int(page.locator("#chart-hour").get_attribute("data-points")) >= 1
        # A GPU with a few samples is still drawn on its whole window, not on sub-millisecond ticks.
        hour, day = page.evaluate(
            "() => ['chart-hour', 'chart-day'].map(id => document.getElementById(id).layout.xaxis.range)"
        )
        for drawn, window in ((hour, timedelta(hours=1)), (day, timedelta(days=1))):
            first, last = (datetime.fromisoformat(value) for value in drawn)
            assert abs((last - first) - window) < timedelta(seconds=1), drawn
    for job_id in job_ids:
        client.cancel_job(job_id)
    if os.environ.get("SAVE_DOCS_SCREENSHOTS"):
        # Only when asked: a test run leaves the checkout as it found it.
        shutil.copy(tmp_path / "heatmap.png", Path(settings.BASE_DIR) / "docs" / "heatmap.png")
