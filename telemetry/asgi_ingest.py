"""The ingest endpoint as a bare ASGI application.

A node agent's batch needs none of Django's request machinery (sessions, CSRF, messages,
allauth, URL resolution): going straight from the ASGI scope to the same parsing and
storage functions as telemetry.views.ingest roughly halves the cost of a batch, which is
what lets one web process take 10,000 GPUs every 10 s. The Django view stays the reference
(and serves the test client); both share `handle_batch`.
"""

from __future__ import annotations

import json

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from telemetry.views import handle_batch

MAX_BODY_BYTES = 8 * 1024 * 1024


async def _read_body(receive) -> bytes | None:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return b""
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _respond(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def ingest_app(scope, receive, send):
    if scope["method"] != "POST":
        await _respond(send, 405, {"detail": "POST only."})
        return
    authorization = ""
    for name, value in scope.get("headers", []):
        if name == b"authorization":
            authorization = value.decode("latin-1")
    body = await _read_body(receive)
    if body is None:
        return
    if body == b"":
        await _respond(send, 413, {"detail": f"The body is over {MAX_BODY_BYTES} bytes."})
        return
    # thread_sensitive=False: batches are independent, so several run at once.
    status, payload = await sync_to_async(_handle_in_thread, thread_sensitive=False)(authorization, body)
    await _respond(send, status, payload)


def _handle_in_thread(authorization: str, body: bytes) -> tuple[int, dict]:
    # What Django's request_started/finished signals do for a view: drop connections that
    # are past CONN_MAX_AGE or broken (a PostgreSQL restart), so a batch never fails on one.
    close_old_connections()
    try:
        return handle_batch(authorization, body)
    finally:
        close_old_connections()
