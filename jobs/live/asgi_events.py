"""POST /api/v1/slurm/events as a bare ASGI application (like telemetry/asgi_ingest.py): the
signature is in the headers and checked before any body is read; an event has no body, and
one that declares a body is refused unread. Answers 202 once the job is marked and, when
this request is the drainer, written (jobs/live/slurm_events.py)."""

from __future__ import annotations

import json
import logging

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from jobs.live.slurm_events import EventRefused, accept, verify

log = logging.getLogger(__name__)


async def _respond(send, status: int, payload: dict) -> None:
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def _header(scope, wanted: bytes) -> str | None:
    values = [value.decode("latin-1") for name, value in scope.get("headers", []) if name.lower() == wanted]
    # Two of one header is not an event this portal sent itself; "," makes the line invalid.
    return ",".join(values) if values else None


async def events_app(scope, receive, send):
    if scope["method"] != "POST":
        await _respond(send, 405, {"detail": "POST only."})
        return
    length = _header(scope, b"content-length")
    if _header(scope, b"transfer-encoding") is not None or (length not in (None, "0")):
        await _respond(send, 413, {"detail": "An event has no body."})
        return
    try:
        event = verify(_header(scope, b"x-gpupool-event"), _header(scope, b"x-gpupool-signature"))
    except EventRefused as refusal:
        await _respond(send, refusal.status, {"detail": refusal.detail})
        return
    try:
        written = await sync_to_async(_accept_in_thread, thread_sensitive=False)(event)
    except Exception:
        # Redis or the database is down: the polling mirror still sees the change.
        log.exception("could not take the Slurm event for job %s", event.job_id)
        await _respond(send, 503, {"detail": "Not taken now; the mirror will catch up."})
        return
    # One line per event: which hook said what of which job, and whether it moved the row.
    log.info("Slurm event: job %s %s (%s), %d rows written", event.job_id, event.state, event.hook, written)
    await _respond(send, 202, {"job_id": event.job_id, "written": written})


def _accept_in_thread(event) -> int:
    close_old_connections()
    try:
        return accept(event)
    finally:
        close_old_connections()
