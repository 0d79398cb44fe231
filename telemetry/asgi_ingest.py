"""The ingest endpoint as a bare ASGI application.

A node agent's batch needs none of Django's request machinery (sessions, CSRF, messages,
allauth, URL resolution): going straight from the ASGI scope to the same parsing and
storage functions as telemetry.views.ingest roughly halves the cost of a batch, which is
what lets one web process take 10,000 GPUs every 10 s. The Django view stays the reference
(and serves the test client); both run the steps of telemetry.views in the same order:
Content-Length, then the token, and only then the body, never past its declared length.

The web process refuses a body over MAX_REQUEST_BODY_BYTES before reading it
(gpupool/body_limit.py); these checks keep a body over the ingest's own 8 MiB out of the
portal's memory and its JSON parser.
"""

from __future__ import annotations

from asgiref.sync import sync_to_async

from foundation.asgi_json import ClientGone, in_thread, read_body, request_header, respond_json
from telemetry.views import (
    MAX_BODY_BYTES,  # noqa: F401  (re-exported: the limit this path enforces)
    authenticate,
    body_size_mismatch,
    length_refusal,
    store_batch,
)


async def ingest_app(scope, receive, send):
    if scope["method"] != "POST":
        await respond_json(send, 405, {"detail": "POST only."})
        return
    declared, refusal = length_refusal(
        request_header(scope, b"content-length"), request_header(scope, b"transfer-encoding")
    )
    if refusal is not None:
        await respond_json(send, *refusal)
        return
    # thread_sensitive=False: batches are independent, so several run at once.
    on_thread = sync_to_async(in_thread, thread_sensitive=False)
    token = await on_thread(authenticate, request_header(scope, b"authorization") or "")
    if isinstance(token, tuple):
        await respond_json(send, *token)
        return
    try:
        body = await read_body(receive, declared)
    except ClientGone:
        return
    if len(body) != declared:
        await respond_json(send, *body_size_mismatch(declared, len(body)))
        return
    status, payload = await on_thread(store_batch, token, body)
    await respond_json(send, status, payload)
