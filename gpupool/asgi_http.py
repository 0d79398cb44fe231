"""Django's synchronous request handling served over ASGI, each request on a thread of its own.

Django's own ASGI handler, with middleware that is not async-capable (WhiteNoise), hops
between the event loop and its thread three times a request and listens for disconnects
beside it; on the 2-core dev machine that doubled a small API read through Daphne (22 ms
against 10 ms; bench/submit_and_live_status.py). Here Django's WSGI handler and its
middleware run whole in one thread hop; a plain response comes back complete and closed from
that hop, a streaming one (a log download) is read a chunk a hop.

Each request takes a *lane* (a one-thread executor) from a bounded set, for all of its hops,
and gives it back when it is done: requests run side by side, as under a threaded WSGI server,
so a slow one (a password hash, a hanging slurmrestd call, a PDF) holds its own lane and no
other request's (bench/http_concurrency.py measures this). A lane's thread lives on, with its
database connection (CONN_MAX_AGE), for the requests after it; a streaming response's chunks
are read in the thread that made it, so a lazy queryset in it meets its own connection.
asgiref's thread-sensitive default would instead run every request of the process on one
shared thread, one after another.

Everything is sent from the event loop: asgiref's WsgiToAsgi sends from the worker thread
through AsyncToSync, and a keep-alive connection's next request then inherited that finished
call's executor and failed ("CurrentThreadExecutor already quit or is broken")."""

import asyncio
import contextvars
import queue
import threading
from concurrent.futures import ThreadPoolExecutor
from tempfile import SpooledTemporaryFile

from asgiref.wsgi import WsgiToAsgiInstance
from django.conf import settings
from django.db import connections

from foundation.asgi_json import request_header

_END = object()
# A request body up to this size stays in memory, a larger one (a dataset upload's 8 MiB chunk)
# goes to a temporary file, so many uploads at once hold no more memory than a batch each.
BODY_IN_MEMORY = 65536
BODY_BATCH = 1024 * 1024
# Except bodies that declare a length up to BODY_IN_MEMORY_MAX, MEMORY_BODIES of them at once
# (at most 72 MiB of a process's memory).
BODY_IN_MEMORY_MAX = 9 * 1024 * 1024
MEMORY_BODIES = 8


def _declared_length(scope) -> int | None:
    """The request's Content-Length; None when it has none, or one that is not a number."""
    value = request_header(scope, b"content-length")
    return int(value) if value and value.isdigit() else None


class Lanes:
    """At most `size` one-thread executors, each lent to one request at a time.

    Loop-agnostic (a plain thread-safe queue), so one instance serves the server's loop and a
    test's loops alike. When every lane is busy, a request waits for one without blocking
    the event loop."""

    def __init__(self, size: int):
        if size < 1:
            raise ValueError("an HTTP server needs at least one request thread")
        self.size = size
        self._idle: queue.SimpleQueue[ThreadPoolExecutor] = queue.SimpleQueue()
        self._created = 0
        self._replaced = 0
        self._creating = threading.Lock()
        self._waiter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="http-lane-wait")

    async def take(self) -> ThreadPoolExecutor:
        try:
            return self._idle.get_nowait()
        except queue.Empty:
            pass
        with self._creating:
            fresh = self._created < self.size
            self._created += fresh
            number = self._created
        if fresh:
            return ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"http-{number}")
        # All busy: one helper thread waits on the queue for the loop (waiters queue behind it).
        waiting = asyncio.get_running_loop().run_in_executor(self._waiter, self._idle.get)
        try:
            return await asyncio.shield(waiting)
        except asyncio.CancelledError:
            # The request went away while it waited: the lane it would have had goes back.
            waiting.add_done_callback(lambda done: done.cancelled() or self.give_back(done.result()))
            raise

    def give_back(self, lane: ThreadPoolExecutor) -> None:
        self._idle.put(lane)

    def replace(self) -> None:
        """The caller keeps its lane for good (a streamed answer that may take hours at a slow
        client's pace): a fresh lane takes its place in the set, so the set's size is kept for
        everybody else. The caller retires its own lane when done (`retire`)."""
        with self._creating:
            self._replaced += 1
            number = self._replaced
        # Into the idle queue, where a request waiting for a lane finds it.
        self._idle.put(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"http-r{number}"))


def retire(lane: ThreadPoolExecutor) -> None:
    """A lane taken out of the set: its database connections closed in its thread, then the
    thread ends."""
    lane.submit(connections.close_all)
    lane.shutdown(wait=False)


async def _in_lane(lane: ThreadPoolExecutor, function, *args):
    """`function(*args)` in the lane's thread, with the caller's context variables."""
    context = contextvars.copy_context()
    return await asyncio.get_running_loop().run_in_executor(lane, context.run, function, *args)


class DjangoHttp:
    """ASGI application for Django's HTTP requests: `DjangoHttp(get_wsgi_application(), threads=N)`."""

    def __init__(self, wsgi_application, threads: int = 16):
        self.wsgi_application = wsgi_application
        self.lanes = Lanes(threads)
        self._memory_slots = threading.BoundedSemaphore(MEMORY_BODIES)
        self._stream_slots = threading.BoundedSemaphore(settings.HTTP_STREAMS)

    async def __call__(self, scope, receive, send):
        # A body of known, bounded length (a dataset upload's 8 MiB chunk) is held in memory
        # while a slot is free: spooled to a file it was written to disk twice more (Daphne
        # buffers it in a file too), and the kernel's dirty-page throttling made the writes the
        # chunk's largest cost (bench/datasets.py). Others, and all beyond the slots, spool.
        length = _declared_length(scope)
        in_memory = length is not None and length <= BODY_IN_MEMORY_MAX and self._memory_slots.acquire(blocking=False)
        try:
            await self._serve(scope, receive, send, in_memory)
        finally:
            if in_memory:
                self._memory_slots.release()

    async def _serve(self, scope, receive, send, in_memory: bool):
        with SpooledTemporaryFile(max_size=BODY_IN_MEMORY_MAX if in_memory else BODY_IN_MEMORY) as body:
            # The server hands a body over in pieces (Daphne's were 8 KiB, Uvicorn's are up to
            # 64 KiB): gathered and written in batches (one write per 8 KiB cost 11 ms of an
            # 8 MiB upload chunk under Daphne: bench/datasets.py).
            pieces, gathered = [], 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                piece = message.get("body", b"")
                pieces.append(piece)
                gathered += len(piece)
                if gathered >= BODY_BATCH:
                    body.write(b"".join(pieces))
                    pieces, gathered = [], 0
                if not message.get("more_body"):
                    break
            body.write(b"".join(pieces))
            body.seek(0)
            lane = await self.lanes.take()
            kept = False
            try:
                outcome = await _in_lane(lane, self._respond, scope, body)
                start, content, response, chunks = outcome
                await send(start)
                if response is None:
                    await send({"type": "http.response.body", "body": content})
                    return
                # A streamed answer goes at its client's pace (the server's flow control; a reader
                # that takes nothing is cut off: gpupool/flow_budget.py): it
                # keeps its lane's thread (its chunks may read the lane's database connection)
                # but leaves the set, so slow readers never leave the others without lanes. At
                # most HTTP_STREAMS of them at once; past that a stream holds a lane as any request.
                kept = self._stream_slots.acquire(blocking=False)
                if kept:
                    self.lanes.replace()
                    # A file's blocks need no database: the connection is not held for the
                    # download's hours (a chunk that queries opens one again).
                    await _in_lane(lane, connections.close_all)
                try:  # a chunk a hop, closed in the thread whatever happens to the client
                    while (chunk := await _in_lane(lane, next, chunks, _END)) is not _END:
                        if chunk:
                            await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b""})
                finally:
                    await _in_lane(lane, response.close)
            finally:
                if kept:
                    retire(lane)
                    self._stream_slots.release()
                else:
                    self.lanes.give_back(lane)

    def _respond(self, scope, body):
        """In the thread: the response's start message, and its whole content (closed) or,
        for a streaming response, the response and its iterator."""
        converter = WsgiToAsgiInstance(self.wsgi_application)
        converter.scope = scope
        try:
            environ = converter.build_environ(scope, body)
        except ValueError:  # too many duplicate headers
            start = {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"text/plain")]}
            return start, b"Bad Request: too many duplicate headers", None, None
        response = self.wsgi_application(environ, converter.start_response)
        if getattr(response, "streaming", False):
            return converter.response_start, b"", response, iter(response)
        try:
            content = b"".join(response)
        finally:
            if hasattr(response, "close"):  # optional in WSGI; always there in Django
                response.close()  # Django's request_finished: database connections tidied
        return converter.response_start, content, None, None
