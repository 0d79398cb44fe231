"""The launchers a session's command carries (interactive/launchers/), run as the job runs them:
`python3 -c <text>`, with an app behind them. The real code-server and TensorBoard behind them are
tested in the dev cluster's images (test_session_kinds_live.py)."""

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from interactive.kinds import PORT_LINE, TENSORBOARD, VSCODE

GUARD = (Path(__file__).parents[1] / "launchers" / "session_guard.py").read_text()

# Stands in for code-server: HTTP on the Unix socket it is given, answering with its path.
UNIX_APP = """
import http.server, socketserver, sys
class Answer(http.server.BaseHTTPRequestHandler):
    def address_string(self):
        return "unix"
    def log_message(self, *args):
        pass
    def do_GET(self):
        body = ("app saw " + self.path + " auth=" + str(self.headers.get("authorization"))).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
socketserver.ThreadingUnixStreamServer(sys.argv[1], Answer).serve_forever()
"""


@pytest.fixture
def guarded_app(tmp_path):
    socket_path = str(tmp_path / "app.sock")
    guard = subprocess.Popen(
        [sys.executable, "-c", GUARD, socket_path, "--", sys.executable, "-c", UNIX_APP, socket_path],
        env={**os.environ, "JUPYTER_TOKEN": "s3cret"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        line = guard.stdout.readline()
        assert line.startswith(PORT_LINE), line
        port = int(line[len(PORT_LINE) :])
        deadline = time.monotonic() + 10
        while not os.path.exists(socket_path) and time.monotonic() < deadline:
            time.sleep(0.05)
        yield port, guard
    finally:
        guard.terminate()
        guard.wait(timeout=10)


def test_the_guard_lets_through_only_the_sessions_token(guarded_app):
    port, _guard = guarded_app
    url = f"http://127.0.0.1:{port}/healthz"
    assert httpx.get(url).status_code == 403
    assert httpx.get(url, headers={"Authorization": "token wrong"}).status_code == 403
    assert httpx.get(url, headers={"Authorization": "Bearer s3cret"}).status_code == 403
    answer = httpx.get(url, headers={"Authorization": "token s3cret"})
    assert answer.status_code == 200 and answer.text.startswith("app saw /healthz")


def test_the_guard_refuses_a_request_with_two_authorizations(guarded_app):
    port, _guard = guarded_app
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(
            b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: token s3cret\r\nAuthorization: token other\r\n\r\n"
        )
        assert connection.recv(100).startswith(b"HTTP/1.1 403")


def test_the_guard_drops_a_head_that_never_ends_and_ends_with_its_app(guarded_app):
    port, guard = guarded_app
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(b"GET / HTTP/1.1\r\n" + b"X-Filler: " + b"a" * (70 * 1024))
        assert connection.recv(100) == b""  # over 64 KiB of head: closed, nothing relayed
    # The app is gone (a crash, or Slurm's cancel): the guard ends too, so the job does.
    guard.terminate()
    assert guard.wait(timeout=10) is not None


def test_each_apps_command_carries_its_launcher_and_no_user_text():
    assert "base64 -d" in VSCODE.command and "code-server --socket" in VSCODE.command
    assert "--auth none" in VSCODE.command  # only behind the guard, on a socket of mode 600
    assert "mktemp -d" in VSCODE.command
    assert "base64 -d" in TENSORBOARD.command
