"""Choosing "any cluster" on the job form in Debian's Chromium at phone width: the job page says
where it went and why, follows it to its end on the other dev generation, and the job list
filters by cluster. The real portal (web process, worker, beat) with both dev clusters."""

import json
import re
from dataclasses import replace

import pytest

from cluster.tests.test_jobs_on_clusters_live import OTHER
from testing.browser import chromium_page, fill_job_form, log_in
from testing.servers import portal_stack
from testing.slurm import remove_cluster_user

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]


def test_any_cluster_from_the_form_on_a_phone(alice, provision, other_generation, own_a100s_held, tmp_path, settings):
    profile = provision(alice)
    site_b = replace(other_generation, name=OTHER)
    settings.EXTRA_CLUSTERS = (site_b,)  # this process's too: the clean-up removes the account there
    clusters_file = tmp_path / "clusters.json"
    clusters_file.write_text(
        json.dumps(
            [
                {
                    "name": OTHER,
                    "slurmrestd_url": site_b.slurmrestd_url,
                    "jwt_key_file": str(site_b.jwt_key_file),
                    "cli_prefix": " ".join(site_b.cli_prefix),
                    "gpu_types": list(site_b.gpu_types),
                    "job_root": site_b.job_root,
                    "job_root_local": str(site_b.job_root_local),
                }
            ]
        )
    )
    try:
        with (
            chromium_page(playwright_api, width=390, height=844) as page,
            portal_stack(worker=True, beat=True, extra_env={"CLUSTERS_FILE": str(clusters_file)}) as base_url,
        ):
            log_in(page, base_url, "alice", "pw-alice")
            errors = []
            page.on("pageerror", lambda error: errors.append(error))
            fill_job_form(page, base_url, name="anywhere", command="echo hello from anywhere", gpu_type="a100")
            page.select_option("#id_cluster", "any")
            page.click("[data-submit]")
            page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
            cluster = page.locator("dl.facts [data-cluster]")
            expect(cluster).to_contain_text(f"{OTHER} can start it now")
            expect(page.locator("dl.facts [data-field=state_label]")).to_have_text("Completed", timeout=90000)
            expect(page.locator('[data-log="stdout"]')).to_contain_text("hello from anywhere", timeout=15000)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(path=str(tmp_path / "any-cluster-phone.png"), full_page=True)

            page.goto(f"{base_url}/jobs/")
            page.click(f"nav.chips >> text={OTHER}")
            page.wait_for_url(re.compile(rf".*/jobs/\?cluster={OTHER}$"))
            expect(page.locator("table.jobs-table tbody tr[data-job-id]")).to_have_count(1)
            expect(page.locator("table.jobs-table [data-cluster]")).to_have_text(f"on {OTHER}")
            page.click("nav.chips >> text=All clusters")
            expect(page.locator("nav.chips a[aria-current=page]")).to_have_text("All clusters")
            # The heatmap shows site-b's nodes after the portal's own, under its name.
            page.goto(f"{base_url}/console/heatmap/")
            expect(page.locator("section.hm-type[data-cluster=site-b] h2").first).to_contain_text(f"{OTHER} · ")
            expect(page.locator("section.hm-type").first).not_to_have_attribute("data-cluster", OTHER)
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            page.screenshot(path=str(tmp_path / "heatmap-clusters-phone.png"), full_page=True)
            assert errors == []
    finally:
        remove_cluster_user(profile.cluster_username, cluster=OTHER)
