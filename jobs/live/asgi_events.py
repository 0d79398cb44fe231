"""POST /api/v1/slurm/events as a bare ASGI application (like telemetry/asgi_ingest.py): the
signature is in the headers and checked before any body is read; an event has no body, and
one that declares a body is refused unread. Answers 202 once the job is marked and, when
this request is the drainer, written (jobs/live/slurm_events.py)."""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.db import close_old_connections

from foundation.asgi_json import request_header, respond_json
from jobs.live.slurm_events import EventRefused, accept, verify

log = logging.getLogger(__name__)


async def events_app(scope, receive, send):
    if scope["method"] != "POST":
        await respond_json(send, 405, {"detail": "POST only."})
        return
    length = request_header(scope, b"content-length")
    if request_header(scope, b"transfer-encoding") is not None or (length not in (None, "0")):
        await respond_json(send, 413, {"detail": "An event has no body."})
        return
    try:
        event = verify(request_header(scope, b"x-gpupool-event"), request_header(scope, b"x-gpupool-signature"))
    except EventRefused as refusal:
        await respond_json(send, refusal.status, {"detail": refusal.detail})
        return
    try:
        written = await sync_to_async(_accept_in_thread, thread_sensitive=False)(event)
    except Exception:
        # Redis or the database is down: the polling mirror still sees the change.
        log.exception("could not take the Slurm event for job %s", event.job_id)
        await respond_json(send, 503, {"detail": "Not taken now; the mirror will catch up."})
        return
    # One line per event: which hook said what of which job, and whether it moved the row.
    log.info("Slurm event: job %s %s (%s), %d rows written", event.job_id, event.state, event.hook, written)
    await respond_json(send, 202, {"job_id": event.job_id, "written": written})


def _accept_in_thread(event) -> int:
    close_old_connections()
    try:
        return accept(event)
    finally:
        close_old_connections()
