"""VS Code and TensorBoard sessions on the real cluster, through a real web process: code-server
starts in the job's container behind its token guard and answers through the proxy only; a
TensorBoard reads the event files of a sweep's tasks, read-only, and shows them side by side."""

import httpx
import pytest

from accounts.models import ApiToken
from cluster.clusters.services import rest_client
from conftest import subscribe
from interactive.models import InteractiveSession
from interactive.tests.live import SESSION, through_proxy, until_ready
from jobs.models import UNREAD_OR_UNFINISHED, Sweep
from jobs.tasks import run_sync
from sweeps import queries
from testing.servers import portal_stack
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

VSCODE_IMAGE = "registry.local/gpupool/pytorch-code-server:24.05-4.139.1"

# A training run's scalars, as a SummaryWriter writes them (TensorBoard's own writer: no framework).
WRITE_EVENTS = (
    "from tensorboard.compat.proto import event_pb2, summary_pb2; "
    "from tensorboard.summary.writer.event_file_writer import EventFileWriter; import time; "
    "w = EventFileWriter('runs'); "
    "[w.add_event(event_pb2.Event(wall_time=time.time(), step=s, summary=summary_pb2.Summary("
    "value=[summary_pb2.Summary.Value(tag='loss', simple_value={lr} / (s + 1))]))) for s in range(5)]; "
    "w.close()"
)
SWEEP = {
    "name": "lr",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "command": f'python3 -c "{WRITE_EVENTS}"',
    "time_limit_minutes": 3,
    "parameters": {"lr": [1, 2]},
}


def _stop(api, session_id: int) -> None:
    api.post(f"/api/v1/sessions/{session_id}/stop", {}, format="json")
    session = InteractiveSession.objects.select_related("job").get(pk=session_id)
    if session.job.slurm_job_id:
        rest_client().cancel_job(session.job.slurm_job_id)


def test_vs_code_answers_through_the_portal_and_its_guard_refuses_everyone_else(
    alice, bob, provision, api_client_for, settings
):
    settings.SUBMIT_INLINE = True
    provision(alice)
    _token, alice_key = ApiToken.issue(alice, "sessions")
    _token, bob_key = ApiToken.issue(bob, "sessions")
    api = api_client_for(alice)
    created = api.post("/api/v1/sessions/", {**SESSION, "kind": "vscode", "image": VSCODE_IMAGE}, format="json")
    assert created.status_code == 201, created.content
    session_id = created.data["id"]
    try:
        with portal_stack(extra_env={"SESSIONS_DOMAIN": "sessions.localhost"}) as base_url:
            session = until_ready(session_id, timeout=180)
            health = through_proxy(base_url, session, "/healthz", token=alice_key)
            assert health.status_code == 200 and "status" in health.json(), health.text
            workbench = through_proxy(base_url, session, "/", token=alice_key, follow_redirects=True)
            assert workbench.status_code == 200 and "vscode" in workbench.text.lower(), workbench.text[:300]
            assert session.token not in workbench.text
            # Anyone else, through the portal or straight at the node's port: nothing.
            assert through_proxy(base_url, session, "/healthz", token=bob_key).status_code == 404
            direct = httpx.get(f"http://{session.address}:{session.port}/healthz", timeout=10)
            assert direct.status_code == 403
            wrong = httpx.get(
                f"http://{session.address}:{session.port}/healthz", headers={"Authorization": "token x"}, timeout=10
            )
            assert wrong.status_code == 403
    finally:
        _stop(api, session_id)


def test_a_tensorboard_compares_a_sweeps_tasks_read_only(alice, provision, api_client_for, settings, eager_tasks):
    settings.SUBMIT_INLINE = True
    subscribe(alice, "pro")
    provision(alice)
    _token, alice_key = ApiToken.issue(alice, "sessions")
    api = api_client_for(alice)
    answer = api.post("/api/v1/sweeps/", SWEEP, format="json")
    assert answer.status_code == 201, answer.content
    sweep = Sweep.objects.get(pk=answer.json()["id"])

    def ended():
        run_sync()
        return not queries.current_tasks(sweep).filter(UNREAD_OR_UNFINISHED).exists()

    wait_for(ended, timeout=240, interval=0.5, what="the sweep's tasks to end")
    assert set(queries.current_tasks(sweep).values_list("state", flat=True)) == {"COMPLETED"}

    created = api.post("/api/v1/sessions/", {**SESSION, "kind": "tensorboard", "board_sweep": sweep.pk}, format="json")
    assert created.status_code == 201, created.content
    session_id = created.data["id"]
    try:
        with portal_stack(extra_env={"SESSIONS_DOMAIN": "sessions.localhost"}) as base_url:
            session = until_ready(session_id, timeout=180)

            def both_runs():
                runs = through_proxy(base_url, session, "/data/runs", token=alice_key).json()
                return {"sweep/0/runs", "sweep/1/runs"} <= set(runs) and runs

            runs = wait_for(both_runs, timeout=60, interval=1, what="TensorBoard to read both tasks' runs")
            assert all(run.startswith("sweep/") for run in runs), runs
            for task, lr in ((0, 1), (1, 2)):
                scalars = through_proxy(
                    base_url,
                    session,
                    "/data/plugin/scalars/scalars",
                    token=alice_key,
                    params={"run": f"sweep/{task}/runs", "tag": "loss"},
                ).json()
                assert [round(point[2], 3) for point in scalars] == [round(lr / (s + 1), 3) for s in range(5)]
            # Read-only: the board's job cannot change the runs it shows (its log says it mounted them so).
    finally:
        _stop(api, session_id)
