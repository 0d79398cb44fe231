"""Sessions on the real cluster, through a real web process: JupyterLab starts in the job's container,
answers through the proxy, runs code over the proxied WebSocket, refuses everyone else, and is
stopped when idle."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiToken
from billing.models import UsageRecord
from billing.usage.metering import run_metering
from cluster.clusters.services import rest_client
from interactive.actions.culling import cull_idle_sessions
from interactive.models import InteractiveSession
from interactive.tests.live import SESSION, run_code, run_in_terminal, through_proxy, until_ready
from jobs.tasks import run_sync
from testing.servers import portal_stack
from testing.slurm import wait_for, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def test_a_session_starts_answers_through_the_portal_only_and_is_culled_when_idle(
    alice, bob, provision, api_client_for, settings
):
    settings.SUBMIT_INLINE = True
    provision(alice)
    _token, alice_key = ApiToken.issue(alice, "sessions")
    _token, bob_key = ApiToken.issue(bob, "sessions")
    created = api_client_for(alice).post("/api/v1/sessions/", SESSION, format="json")
    assert created.status_code == 201, created.content
    assert created.data["state"] in ("queued", "starting") and created.data["url"] is None
    session_id = created.data["id"]

    with portal_stack(extra_env={"SESSIONS_DOMAIN": "sessions.localhost"}) as base_url:
        session = until_ready(session_id)
        shown = api_client_for(alice).get(f"/api/v1/sessions/{session_id}/").data
        assert shown["state"] == "ready"
        assert shown["url"].startswith(f"http://s-{session.host_key}.sessions.localhost")
        assert session.server_start_seconds is not None

        specs = through_proxy(base_url, session, "/api/kernelspecs", token=alice_key)
        assert specs.status_code == 200, specs.text
        assert "python3" in specs.json()["kernelspecs"]
        # The server's token never reaches the caller, in a header or a body.
        assert session.token not in specs.text and session.token not in str(specs.headers)

        page = through_proxy(base_url, session, "/lab", token=alice_key)
        assert page.status_code == 200 and "jupyter-config-data" in page.text
        assert session.token not in page.text  # JupyterLab writes it into its page; the proxy takes it out

        code = "import os; print('gpus=' + os.environ['CUDA_VISIBLE_DEVICES'])"
        printed = run_code(base_url, session, alice_key, code)
        assert printed.strip() == "gpus=0"

        # A terminal: created through the proxy, the shell runs in the job's container; the proxy notes
        # the keystrokes and the output (the idle culling's terminal rule).
        shell = run_in_terminal(base_url, session, alice_key, "echo gpus=$CUDA_VISIBLE_DEVICES")
        assert "gpus=0" in shell
        session.refresh_from_db()
        assert session.terminal_input_at is not None and session.terminal_output_at is not None

        # Another user, no credentials, a wrong token: nothing to learn.
        assert through_proxy(base_url, session, "/api/kernelspecs", token=bob_key).status_code == 404
        assert through_proxy(base_url, session, "/api/kernelspecs", token="gpt_nonsense").status_code == 404
        anonymous = through_proxy(base_url, session, "/lab", token="")
        assert anonymous.status_code == 302 and "/sessions/open/" in anonymous.headers["location"]
        assert "python3" not in anonymous.text
        assert api_client_for(bob).get(f"/api/v1/sessions/{session_id}/").status_code == 404

        # Idle for the plan's 30 minutes (the kernel ran the code above, now idle): warned, then stopped.
        soon = timezone.now() + timedelta(minutes=31)
        assert cull_idle_sessions(now=soon)["warned"] == 1
        session.refresh_from_db()
        assert session.idle_warned_at == soon
        assert cull_idle_sessions(now=soon + timedelta(seconds=settings.SESSION_IDLE_WARNING_SECONDS))["stopped"] == 1
        done = wait_for_state(rest_client(), session.job.slurm_job_id, {"CANCELLED"})
        assert done.state == "CANCELLED"
        session = InteractiveSession.objects.select_related("job").get(pk=session_id)
        assert session.stop_reason == "idle"
        gone = through_proxy(base_url, session, "/lab", token=alice_key)
        assert gone.status_code == 410 and "stopped" in gone.text

    # Billed like a job: slurmdbd's record of its run, metered per second.
    def metered():
        run_sync()
        run_metering()
        return UsageRecord.objects.filter(job_id=session.job_id).first()

    record = wait_for(metered, timeout=120, interval=2, what="the session's run, metered")
    assert record.gpu_seconds >= 1 and record.seconds >= 1
    assert record.billable_gpu_seconds + record.included_gpu_seconds + record.credit_gpu_seconds == record.gpu_seconds
    assert api_client_for(alice).get(f"/api/v1/sessions/{session_id}/").data["cost"] is not None
