"""Maintenance in Chromium on the real cluster: an admin plans a window on the console page (Slurm makes a
MAINT reservation) and sees the running job that would cross it; a user at phone width sees the banner,
the job form says a long job would wait for the window and a short one would not, and the long job
submitted waits with Slurm's reason in words; the admin cancels the window (asked first)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.clusters.services import rest_client
from console.models import MaintenanceWindow
from console.tests.test_maintenance import _submit
from jobs import actions
from jobs.diagnosis.reasons import explain_reason
from jobs.mirror.passes import mirror_jobs
from testing.browser import chromium_page, log_in
from testing.servers import daphne_server
from testing.slurm import wait_for, wait_for_state

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.slurm, pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_an_admin_plans_a_window_a_user_sees_it_and_a_long_job_waits_for_it(admin_user, alice, provision, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
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
    finally:
        for job in (running, waiting):
            if job is not None:
                actions.cancel(job)
        # A window left by a failure would hold every later test's long jobs.
        for name in MaintenanceWindow.objects.exclude(slurm_name="").values_list("slurm_name", flat=True):
            reservation_gateway().delete_reservation(name, check=False)
