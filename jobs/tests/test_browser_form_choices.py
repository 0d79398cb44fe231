"""The new-job form in Debian's Chromium, the web process alone (nothing reaches Slurm): Spot
takes the further clusters out of the cluster choice while it is ticked; a sweep refused for
too many submissions a minute goes with one more press."""

import json
import re
import time

import pytest
from django.utils import timezone

from foundation.ratelimit import hit, refund
from jobs.models import Sweep
from jobs.tests.test_form_choices import FURTHER
from testing.browser import chromium_page, fill_job_form, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _provisioned(user):
    user.profile.cluster_username, user.profile.provisioned_at = user.username, timezone.now()
    user.profile.save()
    return user


def test_spot_is_not_offered_with_a_further_cluster(alice, tmp_path):
    _provisioned(alice)
    clusters_file = tmp_path / "clusters.json"
    clusters_file.write_text(
        json.dumps(
            [
                {
                    "name": FURTHER,
                    "slurmrestd_url": "http://127.0.0.1:9",
                    "jwt_key_file": "/nonexistent/jwt.key",
                    "job_root": "/srv/gpupool/jobs",
                    "job_root_local": str(tmp_path / "site-b-jobs"),
                }
            ]
        )
    )
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(extra_env={"CLUSTERS_FILE": str(clusters_file)}) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/jobs/new/")
        further = page.locator(f'#id_cluster option[value="{FURTHER}"]')
        page.select_option("#id_cluster", FURTHER)
        expect(page.locator("[data-spot-cluster-note]")).to_be_hidden()

        page.check("#id_spot")
        expect(further).to_be_disabled()
        assert page.input_value("#id_cluster") == ""  # back to the portal's own
        expect(page.locator("[data-spot-cluster-note]")).to_be_visible()
        page.select_option("#id_cluster", "any")  # Any stays: a spot job then stays home

        page.uncheck("#id_spot")
        expect(further).to_be_enabled()
        expect(page.locator("[data-spot-cluster-note]")).to_be_hidden()
        page.select_option("#id_cluster", FURTHER)
        assert errors == []


def _use_up_this_minute(user_id: int) -> None:
    """The user's one submission of the minute (SUBMIT_RATE_LIMIT_PER_MINUTE=1), spent here; not
    in a minute's last seconds, whose window would end before the form is pressed."""
    if time.time() % 60 > 45:
        time.sleep(61 - time.time() % 60)
    assert hit("submit-user", str(user_id), limit=1).allowed


def test_a_sweep_refused_for_too_many_submissions_goes_with_one_more_press(alice):
    _provisioned(alice)
    with (
        chromium_page(playwright_api, width=1280, height=900) as page,
        portal_stack(extra_env={"SUBMIT_RATE_LIMIT_PER_MINUTE": "1"}) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "alice", "pw-alice")
        fill_job_form(page, base_url, name="lr-sweep", command="echo lr={lr}")
        page.check("[data-sweep-toggle]")
        page.fill("#id_parameters", "lr = 0.1, 0.2, 0.3, 0.4")
        submit = page.locator("[data-submit]")
        expect(submit).to_have_text("Quote the sweep")
        submit.click()
        expect(page.locator("[data-sweep-quote]")).to_contain_text("4 tasks")
        expect(submit).to_have_text("Submit the sweep's 4 tasks")

        _use_up_this_minute(alice.pk)
        submit.click()
        expect(page.locator("[data-form-error]")).to_contain_text("Too many submissions; try again in")
        # The values and the confirmed quote stay: the button still submits.
        expect(submit).to_have_text("Submit the sweep's 4 tasks")
        assert page.input_value("#id_parameters") == "lr = 0.1, 0.2, 0.3, 0.4"
        assert page.input_value("#id_name") == "lr-sweep"
        assert not Sweep.objects.exists()

        refund("submit-user", str(alice.pk))  # the minute's submission is back
        submit.click()
        page.wait_for_url(re.compile(r".*/sweeps/\d+/$"))
        sweep = Sweep.objects.get()
        assert (sweep.name, sweep.point_count) == ("lr-sweep", 4)
        assert errors == []
