"""A small HTTP and WebSocket server standing where a session's Jupyter would listen, for the
proxy's own tests: it answers with what it received, so a test sees exactly what got through.
(The real JupyterLab behind the proxy is tested in test_sessions_live.py.)"""

from __future__ import annotations

import json
import threading
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from django.utils import timezone
from websockets.sync.server import serve

from interactive.models import InteractiveSession
from jobs.models import Job, JobState

PAGE = b"<!doctype html><html><head><title>lab</title></head><body>notebook</body></html>"
# What JupyterLab writes into its page (its server's token): the proxy must take it out.
PAGE_WITH_TOKEN = b'<!doctype html><html><head><script id="jupyter-config-data">{"token": "%s"}</script></head></html>'


class _Echo(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def _answer(self):
        length = int(self.headers.get("content-length") or 0)
        body = self.rfile.read(length) if length else b""
        if self.path.startswith("/endless"):
            return self._endless()
        if self.path.startswith("/api/kernels") and self.server.kernels == "huge":
            # A job's own server may say anything: 8 MiB of a list that never ends.
            payload, kind = b"[" + b'{"execution_state": "busy"},' * (8 * 1024 * 1024 // 28), "application/json"
        elif self.path.startswith("/api/kernels") and self.server.kernels is not None:
            payload, kind = json.dumps(self.server.kernels).encode(), "application/json"
        elif self.path.startswith("/lab/big"):
            token = self.headers.get("authorization", "").removeprefix("token ").encode()
            payload, kind = PAGE_WITH_TOKEN % token + b"x" * (5 * 1024 * 1024) + token * 3, "text/html"
        elif self.path.startswith("/lab"):
            token = self.headers.get("authorization", "").removeprefix("token ").encode()
            payload, kind = PAGE_WITH_TOKEN % token, "text/html; charset=utf-8"
        else:
            seen = {
                "method": self.command,
                "path": self.path,
                "headers": dict(self.headers.items()),
                "body": body.decode(),
            }
            payload, kind = json.dumps(seen).encode(), "application/json"
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Set-Cookie", "gpupool_session=forged; Path=/")
        self.send_header("Set-Cookie", "_xsrf=abc; Path=/")
        self.end_headers()
        self.wfile.write(payload)

    def _endless(self):
        """A notebook's answer that never ends (a file served as it grows, or a hostile job)."""
        self.send_response(200)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        piece = b"x" * (1024 * 1024)
        try:
            while True:
                self.wfile.write(piece)
        except OSError:
            pass  # the proxy went away

    do_GET = do_POST = do_PUT = _answer


def _websocket_echo(connection):
    headers = dict(connection.request.headers.raw_items())
    connection.send(json.dumps({"headers": headers, "subprotocol": connection.subprotocol}))
    for message in connection:
        connection.send(message)


@contextmanager
def upstream_server():
    """Yields (http port, websocket port) on 127.0.0.1."""
    http = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    # What GET /api/kernels answers (a test sets it); None: the echo, as for any path.
    http.kernels = None
    threading.Thread(target=http.serve_forever, daemon=True).start()
    websocket = serve(_websocket_echo, "127.0.0.1", 0, subprotocols=["v1.kernel.websocket.jupyter.org"])
    threading.Thread(target=websocket.serve_forever, daemon=True).start()
    try:
        yield http.server_address[1], websocket.socket.getsockname()[1], http
    finally:
        http.shutdown()
        http.server_close()  # connections to its port are refused from here, as a stopped job's are
        websocket.shutdown()


def session_on(owner, *, port: int, state=JobState.RUNNING, ready=True, kind="jupyterlab") -> InteractiveSession:
    """A session of `owner` whose server listens on 127.0.0.1:`port` (ready unless told)."""
    job = Job.objects.create(owner=owner, state=state, name="lab", nodes="gpu-4090-01")
    return InteractiveSession.objects.create(
        job=job,
        owner=owner,
        kind=kind,
        address="127.0.0.1",
        port=port,
        ready_at=timezone.now() if ready else None,
    )
