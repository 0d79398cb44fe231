"""The maintenance page at phone width, as an admin on call reads it: a rolling restart under way (one
node back, one draining with Slurm's reason), the last canary and a window ahead, nothing wider than
the screen, the restart's stop asked first; the page follows a node coming back without a reload."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.models import Node
from console.models import CanaryCheck, CanaryRun, MaintenanceWindow, RollingRestart, RollingRestartStep
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_follows_a_rolling_restart_on_a_phone(admin_user):
    now = timezone.now()
    for name in ("gpu-a100-01", "gpu-a100-02", "gpu-4090-01"):
        Node.objects.create(name=name, state="IDLE")
    # A node the site's own tools are restarting (`scontrol reboot ASAP`), as the mirror copies it.
    Node.objects.create(name="gpu-h100-01", state="MIXED", state_flags="DRAIN,REBOOT_REQUESTED", reason="site upgrade")
    MaintenanceWindow.objects.create(
        start=now + timedelta(hours=5), end=now + timedelta(hours=6), reason="Slurm upgrade to 26.05",
        created_by=admin_user, slurm_name="maint-1",
    )  # fmt: skip
    canary = CanaryRun.objects.create(trigger=CanaryRun.Trigger.MANUAL, image="nvcr.io/nvidia/pytorch:24.05-py3")
    CanaryCheck.objects.create(run=canary, node="gpu-4090-01", state=CanaryCheck.State.PASSED)
    restart = RollingRestart.objects.create(reason="slurmd upgrade to 24.11.6", started_by=admin_user)
    RollingRestartStep.objects.create(
        restart=restart, node="gpu-a100-01", position=0, state=RollingRestartStep.State.DONE, detail="Back after 3 s."
    )
    draining = RollingRestartStep.objects.create(
        restart=restart, node="gpu-a100-02", position=1, state=RollingRestartStep.State.DRAINING, asked_at=now
    )
    with daphne_server() as base_url, chromium_page(playwright_api, width=390, height=844) as page:
        log_in(page, base_url, "ada", "pw-ada")
        page.goto(f"{base_url}/console/maintenance/")
        steps = page.locator("[data-rolling-steps]")
        second = steps.locator('[data-rolling-node="gpu-a100-02"]')
        expect(second).to_contain_text("draining: restarts once its jobs end")
        expect(page.locator("progress")).to_have_attribute("value", "1")
        expect(page.locator("[data-stop-rolling]")).to_be_visible()
        site = page.locator('[data-out-of-service] [data-out-node="gpu-h100-01"]')
        expect(site).to_contain_text("restart asked: draining until its jobs end")
        expect(site).to_contain_text("site upgrade")
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        page.evaluate("window.__marker = 'no reload'")
        RollingRestartStep.objects.filter(pk=draining.pk).update(state=RollingRestartStep.State.DONE)
        RollingRestart.objects.filter(pk=restart.pk).update(state=RollingRestart.State.DONE, finished_at=timezone.now())
        expect(page.locator("[data-rolling-state]")).to_have_text("done", timeout=15000)
        expect(page.locator('[data-rolling-step-state="done"]')).to_have_count(2)
        assert page.evaluate("window.__marker") == "no reload"
        expect(page.locator("[data-start-rolling]")).to_be_visible()  # the form again, once it ended
        # The site's restart ends: the node leaves the list, still without a reload.
        Node.objects.filter(name="gpu-h100-01").update(state="IDLE", state_flags="", reason="")
        expect(page.locator('[data-out-node="gpu-h100-01"]')).to_have_count(0, timeout=15000)
        assert page.evaluate("window.__marker") == "no reload"
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
