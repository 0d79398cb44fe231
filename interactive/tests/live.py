"""Helpers for the sessions' tests against the real cluster and a real web process."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import urlsplit

import httpx
from websockets.sync.client import connect as websocket_connect

from cluster.clusters.services import rest_client
from interactive.actions.starting import check_start
from interactive.models import InteractiveSession
from interactive.origins import session_host
from jobs.mirror.rows import apply_slurm_job
from testing.slurm import wait_for

SESSION = {
    "kind": "jupyterlab",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "time_limit_minutes": 30,
}


def until_ready(session_id: int, timeout: float = 120) -> InteractiveSession:
    """What the mirror and the worker do, in the test: read the job from Slurm, look at the server."""

    def look():
        session = InteractiveSession.objects.select_related("job").get(pk=session_id)
        if session.job.slurm_job_id:
            apply_slurm_job(rest_client().get_job(session.job.slurm_job_id))
        outcome = check_start(session_id)
        assert outcome in ("queued", "starting", "ready"), outcome
        return outcome == "ready"

    wait_for(look, timeout=timeout, interval=0.5, what="the session's server to answer")
    return InteractiveSession.objects.select_related("job").get(pk=session_id)


def through_proxy(base_url: str, session: InteractiveSession, path: str, *, token: str, method="GET", **kwargs):
    """A request to the session's origin, sent to the portal's own address (no DNS for it here)."""
    headers = {"Host": f"{session_host(session.host_key)}:{urlsplit(base_url).port}", **kwargs.pop("headers", {})}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.request(method, f"{base_url}{path}", headers=headers, timeout=30, **kwargs)


def run_code(base_url: str, session: InteractiveSession, token: str, code: str, timeout: float = 60) -> str:
    """Starts a kernel through the proxy, runs `code` over the proxied WebSocket, returns its stdout."""
    started = through_proxy(base_url, session, "/api/kernels", token=token, method="POST", json={"name": "python3"})
    assert started.status_code == 201, started.text
    kernel = started.json()["id"]
    port = urlsplit(base_url).port
    url = f"ws://{session_host(session.host_key)}:{port}/api/kernels/{kernel}/channels"
    message_id = uuid.uuid4().hex
    request = {
        "header": {
            "msg_id": message_id,
            "msg_type": "execute_request",
            "username": "test",
            "session": uuid.uuid4().hex,
            "date": "",
            "version": "5.3",
        },
        "parent_header": {},
        "metadata": {},
        "content": {
            "code": code,
            "silent": False,
            "store_history": False,
            "user_expressions": {},
            "allow_stdin": False,
        },
        "channel": "shell",
        "buffers": [],
    }
    output = []
    deadline = time.monotonic() + timeout
    with websocket_connect(
        url,
        additional_headers={"Authorization": f"Bearer {token}"},
        sock=_socket_to(base_url),
        open_timeout=20,
    ) as socket:
        socket.send(json.dumps(request))
        while time.monotonic() < deadline:
            message = json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message.get("parent_header", {}).get("msg_id") != message_id:
                continue
            if message["msg_type"] == "stream":
                output.append(message["content"]["text"])
            if message["msg_type"] == "status" and message["content"]["execution_state"] == "idle":
                return "".join(output)
    raise AssertionError(f"no answer from the kernel within {timeout} s: {output}")


def _socket_to(base_url: str):
    import socket

    parts = urlsplit(base_url)
    return socket.create_connection((parts.hostname, parts.port), timeout=10)


def run_in_terminal(base_url: str, session: InteractiveSession, token: str, command: str, timeout: float = 30) -> str:
    """Opens a JupyterLab terminal through the proxy (POST /api/terminals, then its terminado socket),
    types `command` and returns what the shell printed until the line after it."""
    created = through_proxy(base_url, session, "/api/terminals", token=token, method="POST")
    assert created.status_code == 200, created.text
    name = created.json()["name"]
    port = urlsplit(base_url).port
    url = f"ws://{session_host(session.host_key)}:{port}/terminals/websocket/{name}"
    marker = uuid.uuid4().hex[:8]
    printed = []
    deadline = time.monotonic() + timeout
    with websocket_connect(
        url, additional_headers={"Authorization": f"Bearer {token}"}, sock=_socket_to(base_url), open_timeout=20
    ) as socket:
        socket.send(json.dumps(["stdin", f"{command}; echo done-{marker}\r"]))
        while time.monotonic() < deadline:
            message = json.loads(socket.recv(timeout=max(0.1, deadline - time.monotonic())))
            if message[0] == "stdout":
                printed.append(message[1])
                # The shell echoes what was typed; the marker printed alone ends the command.
                if f"\ndone-{marker}" in "".join(printed).replace("\r", ""):
                    return "".join(printed)
    raise AssertionError(f"no answer from the terminal within {timeout} s: {printed}")
