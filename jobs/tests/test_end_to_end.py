"""The portal as `make dev` runs it (web process, Celery worker and beat) on the real cluster."""

import json
import subprocess
import time
from pathlib import Path

import pytest
import requests
from django.conf import settings
from django.test import Client
from websockets.sync.client import connect

from jobs import protocol
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC
from testing.servers import portal_stack
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
CLUSTER_SCRIPT = Path(settings.BASE_DIR) / "deploy/devcluster/cluster.sh"


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def _bearer(user) -> dict:
    from accounts.models import ApiToken

    _token, key = ApiToken.issue(user, "e2e")
    return {"Authorization": f"Bearer {key}"}


def test_api_submit_runs_on_the_cluster_pushes_states_and_serves_logs(alice, provision):
    provision(alice)
    with portal_stack(worker=True, beat=True) as base_url:
        ws_url = base_url.replace("http://", "ws://") + "/ws/jobs/"
        headers = {"Cookie": f"sessionid={_session_cookie(alice)}", "Origin": base_url}
        with connect(ws_url, additional_headers=headers, open_timeout=10) as socket:
            body = {**GOOD_SPEC, "command": "sleep 4; echo hello from the job; echo to stderr >&2"}
            response = requests.post(f"{base_url}/api/v1/jobs/", json=body, headers=_bearer(alice), timeout=10)
            assert response.status_code == 201, response.text
            job_id = response.json()["id"]

            states = []
            deadline = time.monotonic() + 120
            while "COMPLETED" not in states and time.monotonic() < deadline:
                message = json.loads(socket.recv(timeout=deadline - time.monotonic()))
                if message["job"]["id"] == job_id and (not states or states[-1] != message["job"]["state"]):
                    states.append(message["job"]["state"])
        assert "RUNNING" in states and "COMPLETED" in states, states
        assert states.index("RUNNING") < states.index("COMPLETED")

        logs = requests.get(f"{base_url}/api/v1/jobs/{job_id}/logs", headers=_bearer(alice), timeout=10).json()
        assert "hello from the job" in logs["stdout"]
        assert "to stderr" in logs["stderr"]
        assert logs["diagnosis"] == []
    job = Job.objects.get(pk=job_id)
    assert job.nodes.startswith("gpu-a100-")


def _slurmrestd_pid() -> int:
    return int((settings.DEVCLUSTER_DIR / "pids" / "slurmrestd.pid").read_text())


def test_a_submission_waits_while_slurmrestd_is_down_and_is_submitted_exactly_once(alice, provision, slurm):
    provision(alice)
    with portal_stack(worker=True, beat=True) as base_url:
        subprocess.run(["kill", str(_slurmrestd_pid())], check=True)
        wait_for(lambda: not _answers(), what="slurmrestd to stop")
        try:
            body = {**GOOD_SPEC, "command": "echo submitted once"}
            response = requests.post(f"{base_url}/api/v1/jobs/", json=body, headers=_bearer(alice), timeout=10)
            assert response.status_code == 201
            job_id = response.json()["id"]
            # The inline attempt failed and said so on the row; a worker's try is (or was) next.
            job = Job.objects.get(pk=job_id)
            assert job.state == "SUBMITTING" and job.slurm_job_id is None
            assert "not answering" in job.error, job.error
            job = wait_for(
                lambda: (j := Job.objects.get(pk=job_id)).submit_attempts >= 3 and "not answering" in j.error and j,
                timeout=60,
                what="two failed attempts by a worker, each recorded on the row",
            )
            assert job.state == "SUBMITTING" and job.slurm_job_id is None
        finally:
            subprocess.run([str(CLUSTER_SCRIPT), "up"], check=True, capture_output=True, timeout=120)
        job = wait_for(
            lambda: (j := Job.objects.get(pk=job_id)).state == "COMPLETED" and j,
            timeout=120,
            what="the job to be submitted and complete",
        )
    comment = protocol.slurm_comment(job)
    assert [j.job_id for j in slurm.list_jobs() if j.comment == comment] == [job.slurm_job_id]


def _answers() -> bool:
    try:
        requests.get(settings.SLURMRESTD_URL + "/openapi/v3", timeout=1)
        return True
    except requests.ConnectionError:
        return False
