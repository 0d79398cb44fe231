"""POST /api/v1/slurm/events as a bare ASGI application (like telemetry/asgi_ingest.py): the
signature is in the headers and checked before any body is read. A batch (X-Gpupool-Events)
declares its length, at most what its count of events can take, and its body is read only up
to that; a single event (X-Gpupool-Event) has no body, and one that declares a body is refused
unread. Answers 202 once the events are taken (what a completion tells is written then, the
other jobs marked), then reads those from Slurm (or leaves them to the request draining
already; jobs/slurm_events/receiving.py).

A large batch (a mass change's: more than SMALL_BATCH events) is written on one thread of its
own, one batch after another; a small one (another user's few events, from the forwarder's
express lane) on a pool of its own beside it. With three of a mass change's batches written side
by side, the small one's dozen round trips each waited for the GIL behind them, 450 ms in all on
the 2-core dev machine while slurmctld cancelled 2,000 jobs (bench/event_hooks.py); and large
batches waiting their turn on the shared pool's threads left a small one none to run on."""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor

from foundation.asgi_json import ClientGone, in_thread, read_body, request_header, respond_json
from jobs.slurm_events.receiving import (
    EventRefused,
    after_taken,
    first_time,
    forget,
    mark,
    read_batch,
    verify,
    verify_batch,
)

log = logging.getLogger(__name__)
SMALL_BATCH = 8
_LARGE_BATCHES = ThreadPoolExecutor(max_workers=1, thread_name_prefix="slurm-events-large")
_SMALL_BATCHES = ThreadPoolExecutor(max_workers=4, thread_name_prefix="slurm-events-small")


async def _in_lane(function, argument, large: bool):
    """`function(argument)` on the large batches' one thread or on the small batches' pool."""
    executor = _LARGE_BATCHES if large else _SMALL_BATCHES
    return await asyncio.get_running_loop().run_in_executor(executor, in_thread, function, argument)


async def events_app(scope, receive, send):
    if scope["method"] != "POST":
        await respond_json(send, 405, {"detail": "POST only."})
        return
    try:
        if request_header(scope, b"x-gpupool-events") is not None:
            events = await _read_batch(scope, receive)
        else:
            events = [_read_single(scope)]
    except EventRefused as refusal:
        await respond_json(send, refusal.status, {"detail": refusal.detail})
        return
    except ClientGone:
        return
    started = time.monotonic()
    large = len(events) > SMALL_BATCH
    signature = request_header(scope, b"x-gpupool-signature")
    try:
        if not await _in_lane(first_time, signature, large):
            # A replay (or a retry of a line already taken): answered, nothing done.
            await respond_json(send, 202, {"job_id": events[0].job_id, "events": 0, "replay": True})
            return
        taken = await _in_lane(mark, events, large)
    except Exception:
        # Redis or the database is down: the polling mirror still sees the change.
        log.exception("could not take %d Slurm events (job %s first)", len(events), events[0].job_id)
        try:
            await _in_lane(forget, signature, large)
        except Exception:
            pass  # Redis itself is down: nothing was remembered either
        await respond_json(send, 503, {"detail": "Not taken now; the mirror will catch up."})
        return
    # Taken: the sender may go on with its next batch while this request writes them.
    await respond_json(send, 202, {"job_id": events[0].job_id, "events": len(events)})
    took_ms = 1000 * (time.monotonic() - started)
    answered = time.monotonic()
    try:
        written = await _in_lane(after_taken, taken, large)
    except Exception:
        log.exception("could not write what %d Slurm events changed; the mirror will", len(events))
        return
    # Which hook said what of which job, and whether it moved the rows: how many the events wrote
    # before the answer (and how long that took), how many were read from Slurm after it.
    named = ", ".join(f"{event.job_id} {event.state} ({event.hook})" for event in events[:20])
    log.info(
        "Slurm events: %d (jobs %s%s), %d rows written from them in %.0f ms, %d after in %.0f ms; read by id: %s",
        len(events),
        named,
        " ..." if len(events) > 20 else "",
        len(taken.written),
        took_ms,
        written - len(taken.written),
        1000 * (time.monotonic() - answered),
        sorted(taken.bystanders) or "none",
    )


def _read_single(scope):
    length = request_header(scope, b"content-length")
    if request_header(scope, b"transfer-encoding") is not None or (length not in (None, "0")):
        raise EventRefused(413, "An event has no body.")
    return verify(request_header(scope, b"x-gpupool-event"), request_header(scope, b"x-gpupool-signature"))


async def _read_batch(scope, receive):
    batch = verify_batch(request_header(scope, b"x-gpupool-events"), request_header(scope, b"x-gpupool-signature"))
    length = request_header(scope, b"content-length")
    if request_header(scope, b"transfer-encoding") is not None or length is None or not length.isdigit():
        raise EventRefused(411, "A batch declares its Content-Length.")
    declared = int(length)
    if declared > batch.max_bytes:
        raise EventRefused(413, f"A batch of {batch.count} events is at most {batch.max_bytes} bytes.")
    body = await read_body(receive, declared)
    if len(body) > declared:
        raise EventRefused(413, "More body than declared.")
    return read_batch(batch, body)
