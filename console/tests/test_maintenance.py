"""Maintenance windows on the real cluster: an admin plans one over the API and it is a Slurm MAINT
reservation; a job whose time limit would cross it stays PENDING while a short one runs; users see it
in the banner and cannot plan or cancel one; cancelling removes the reservation; both are audited."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from cluster.actions.mirror import mirror_nodes
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.clusters.services import rest_client
from jobs import actions
from jobs.diagnosis.reasons import explain_reason
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from testing.slurm import wait_for, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _submit(user, minutes: int, command: str = "sleep 2"):
    spec = {**GOOD_SPEC, "gpu_type": "rtx4090", "command": command, "time_limit_minutes": minutes}
    job = actions.submit(user, parse_job_spec(spec, plan=plan_for(user), policy=SpecPolicy.from_settings()))
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    return job


def test_a_window_holds_the_jobs_that_would_cross_it_and_is_removed_when_cancelled(
    admin_user, alice, api_client_for, provision, settings
):
    settings.SUBMIT_INLINE = True
    provision(alice)
    mirror_nodes(rest_client())
    start = (timezone.now() + timedelta(hours=2)).replace(microsecond=0)
    body = {"start": start.isoformat(), "end": (start + timedelta(hours=1)).isoformat(), "reason": "Slurm upgrade"}
    assert api_client_for(alice).post("/api/v1/maintenance/", body, format="json").status_code == 403
    made = api_client_for(admin_user).post("/api/v1/maintenance/", body, format="json")
    assert made.status_code == 201, made.content
    window = made.json()
    held = reservation_gateway().show_reservation(window["slurm_name"])
    try:
        assert held is not None and "MAINT" in held.flags
        # Three hours from now would cross it: it waits. Ten minutes end well before: it runs.
        crossing, short = _submit(alice, 180), _submit(alice, 10)
        assert wait_for_state(rest_client(), short.slurm_job_id, {"COMPLETED"}).state == "COMPLETED"
        waiting = wait_for(
            lambda: (
                (job := rest_client().get_job(crossing.slurm_job_id)).state == "PENDING" and job.state_reason and job
            ),
            what="the crossing job's reason",
        )
        assert waiting.state == "PENDING"
        # slurmrestd gives the reason as "ReqNodeNotAvail" alone (squeue adds "Reserved for maintenance"):
        # the job's page says it in words, never Slurm's raw text.
        assert not explain_reason(waiting.state_reason).startswith("Slurm gives"), waiting.state_reason
        # Users read it a day ahead, and it is listed for them.
        browser = Client()
        browser.force_login(alice)
        assert "Maintenance from" in browser.get("/jobs/").content.decode()
        assert [w["id"] for w in api_client_for(alice).get("/api/v1/maintenance/").json()] == [window["id"]]
        assert api_client_for(alice).delete(f"/api/v1/maintenance/{window['id']}/").status_code == 403
    finally:
        cancelled = api_client_for(admin_user).delete(f"/api/v1/maintenance/{window['id']}/")
    assert cancelled.status_code == 204
    assert reservation_gateway().show_reservation(window["slurm_name"]) is None
    assert api_client_for(alice).get("/api/v1/maintenance/").json() == []
    assert list(
        AuditLog.objects.filter(target=window["slurm_name"]).order_by("pk").values_list("action", flat=True)
    ) == [
        "maintenance.plan",
        "maintenance.cancel",
    ]
    actions.cancel(crossing)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"start": "2020-01-01T00:00:00Z"}, "start"),
        ({"reason": "  "}, "reason"),
        ({"nodes": ["gpu-nowhere-01"]}, "nodes"),
    ],
)
def test_a_window_that_cannot_be_is_refused_with_its_field_and_nothing_reaches_slurm(
    admin_user, api_client_for, change, field
):
    mirror_nodes(rest_client())
    start = timezone.now() + timedelta(hours=2)
    body = {"start": start.isoformat(), "end": (start + timedelta(hours=1)).isoformat(), "reason": "upgrade", **change}
    refused = api_client_for(admin_user).post("/api/v1/maintenance/", body, format="json")
    assert refused.status_code == 400 and field in refused.json()["errors"]
    assert api_client_for(admin_user).get("/api/v1/maintenance/").json() == []
