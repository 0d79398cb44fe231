"""Maintenance in Chromium on the real cluster: an admin plans a window on the console page (Slurm makes a
MAINT reservation) and sees the running job that would cross it; a user at phone width sees the banner,
the job form says a long job would wait for the window and a short one would not, and the long job
submitted waits with Slurm's reason in words; the admin cancels the window (asked first), then restarts
two nodes one at a time while the job runs on another, the page following without a reload."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.clusters.services import rest_client
from console.models import MaintenanceWindow, RollingRestart
from console.tests.test_maintenance import _submit
from console.tests.test_rolling_restart import _drive, put_back, settled_and_idle
from jobs import actions
from jobs.diagnosis.reasons import explain_reason
from jobs.mirror.passes import mirror_jobs
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server
from testing.slurm import wait_for, wait_for_state

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

# first_release: the pages are the same on both generations, and what Slurm does is checked on both by
# test_maintenance.py and test_rolling_restart.py. On 26.05 this flow's rolling restart failed once in
# three runs after the image and restart tests (not reproduced alone; the cause is not known yet).
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
A100S = ["gpu-a100-01", "gpu-a100-02"]


def test_an_admin_plans_a_window_a_user_sees_it_and_a_long_job_waits_for_it(admin_user, alice, provision, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    provision(admin_user)  # the canary after the rolling restart runs as the admin
    mirror_nodes(rest_client())
    # Runs across the window's start: Slurm lets it run (IGNORE_JOBS), the page lists it.
    running = _submit(alice, 240, command="sleep 600")
    wait_for_state(rest_client(), running.slurm_job_id, {"RUNNING"})
    mirror_jobs(rest_client())
    start = timezone.localtime(timezone.now() + timedelta(hours=2)).replace(second=0, microsecond=0)
    waiting = None
    try:
        with daphne_server() as base_url:
            with chromium_page(playwright_api) as page:
                log_in(page, base_url, "ada", "pw-ada")
                page.goto(f"{base_url}/console/maintenance/")
                page.fill("#id_start", start.strftime("%Y-%m-%dT%H:%M"))
                page.fill("#id_end", (start + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M"))
                page.fill("#id_reason", "Slurm upgrade")
                page.click("[data-plan-window] button[type=submit]")
                expect(page.locator("[data-windows-ahead] [data-window]")).to_have_count(1)
                window = MaintenanceWindow.objects.get()
                article = page.locator(f'[data-window="{window.pk}"]')
                expect(article).to_contain_text("Slurm upgrade")
                expect(article.locator("[data-crossing-jobs]")).to_contain_text(str(running.pk))
                assert "MAINT" in reservation_gateway().show_reservation(window.slurm_name).flags

            with chromium_page(playwright_api, width=390, height=844) as phone:
                log_in(phone, base_url, "alice", "pw-alice")
                phone.goto(f"{base_url}/jobs/new/")
                expect(phone.locator("body")).to_contain_text("Maintenance from")
                hint = phone.locator("[data-maintenance-hint]")
                phone.select_option("#id_gpu_type", "rtx4090")
                phone.fill("#id_time_limit_minutes", "180")
                expect(hint).to_be_visible()
                expect(hint).to_contain_text("would still run when it starts")
                phone.fill("#id_time_limit_minutes", "30")
                expect(hint).to_be_hidden()

                waiting = _submit(alice, 180)
                row = wait_for(
                    lambda: (
                        mirror_jobs(rest_client()) is not None
                        and (found := type(waiting).objects.get(pk=waiting.pk)).state_reason
                        and found
                    ),
                    what="the waiting job's reason mirrored",
                )
                phone.goto(f"{base_url}/jobs/{waiting.pk}/")
                # In words (slurmrestd says "ReqNodeNotAvail"), never Slurm's raw text.
                expect(phone.locator("body")).to_contain_text(explain_reason(row.state_reason))

            with chromium_page(playwright_api) as page:
                log_in(page, base_url, "ada", "pw-ada")
                page.goto(f"{base_url}/console/maintenance/")
                page.once("dialog", lambda dialog: dialog.accept())
                page.click(f'[data-window="{window.pk}"] [data-cancel-window]')
                expect(page.locator(f'[data-window="{window.pk}"]')).to_have_count(0)
                assert reservation_gateway().show_reservation(window.slurm_name) is None

                # A rolling restart of the two A100 nodes while the long job runs on an RTX 4090 node.
                settled_and_idle(A100S)
                form = page.locator("[data-start-rolling]")
                form.locator("#id_restart_reason").fill("slurmd upgrade")
                for node in A100S:
                    form.locator(f'input[name=restart_nodes][value="{node}"]').check()
                page.once("dialog", lambda dialog: dialog.accept())  # asked first
                form.locator("button[type=submit]").click()
                expect(page.locator("[data-rolling-steps] [data-rolling-node]")).to_have_count(2)
                page.evaluate("window.__marker = 'no reload'")
                restart = RollingRestart.objects.get()
                # The beat's pass (console.tasks.advance_rolling_restarts), run here: no worker in this test.
                restart = _drive(restart)
                assert restart.state == RollingRestart.State.DONE, (restart.detail, list(restart.steps.values()))
                # The page follows without a reload: both nodes back, the restart done, its canary below.
                expect(page.locator("[data-rolling-state]")).to_have_text("done", timeout=15000)
                expect(page.locator('[data-rolling-step-state="done"]')).to_have_count(2)
                assert page.evaluate("window.__marker") == "no reload"
                assert rest_client().get_job(running.slurm_job_id).state == "RUNNING"
                page.reload()
                expect(page.locator("[data-canary-run]")).to_contain_text("rolling restart")
    finally:
        for job in (running, waiting):
            if job is not None:
                actions.cancel(job)
        # A window left by a failure would hold every later test's long jobs.
        for name in MaintenanceWindow.objects.exclude(slurm_name="").values_list("slurm_name", flat=True):
            reservation_gateway().delete_reservation(name, check=False)
        put_back(A100S)  # a restart that failed leaves no node drained or down for the next tests
