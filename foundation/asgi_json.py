"""The bare ASGI paths' two helpers (the Slurm event hook, telemetry ingest, health checks):
a JSON answer, and one request header read safely.

Bare paths answer without Django's request stack (each for its own reason, in its module)."""

from __future__ import annotations

import json


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
