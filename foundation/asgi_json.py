"""The bare ASGI paths' helpers (the Slurm events, telemetry ingest, health checks): a JSON
answer, one request header read safely, a body read no further than declared, and Django work
run on a worker thread with fresh database connections.

Bare paths answer without Django's request stack (each for its own reason, in its module)."""

from __future__ import annotations

import json

from django.db import close_old_connections


class ClientGone(Exception):
    """The client disconnected before its body was read: nobody is left to answer."""


async def respond_json(send, status: int, payload: dict, *, head: bool = False, no_store: bool = False) -> None:
    """Send `payload` as a JSON response (no body for a HEAD request; `no_store` for answers a
    cache must never keep, such as a health check's)."""
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if no_store:
        headers.append((b"cache-control", b"no-store"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if head else body})


def request_header(scope, wanted: bytes) -> str | None:
    """One header's value, or None. A header sent twice comes back joined by "," so a value
    that must be single (a signature, a Content-Length) is invalid rather than the first copy."""
    values = [value.decode("latin-1") for name, value in scope.get("headers", []) if name.lower() == wanted]
    return ",".join(values) if values else None


async def read_body(receive, declared: int) -> bytes:
    """The body, up to one message past `declared` bytes: a sender that keeps sending is cut
    off there, however much it says is still to come (the caller compares the length)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone
        chunk = message.get("body", b"")
        size += len(chunk)
        chunks.append(chunk)
        if size > declared or not message.get("more_body", False):
            return b"".join(chunks)


def in_thread(function, *args):
    """Run `function(*args)` as a view would be run, for `sync_to_async(thread_sensitive=False)`:
    what Django's request_started/finished signals do, dropping connections past CONN_MAX_AGE or
    broken (a PostgreSQL restart), so the work never fails on one."""
    close_old_connections()
    try:
        return function(*args)
    finally:
        close_old_connections()
