"""Database work of the asynchronous side on bounded thread pools of its own.

Channels' `database_sync_to_async` runs every call of a process on one shared thread, one after
another: one user's 48 clients on their own notebook (each request a proxy decision) moved
every other user's WebSocket connect from p95 31 ms to 1,212 ms. Here each kind of work has its
own pool (`PROXY_DB`: the session proxy's decisions, tickets and status; `SOCKETS_DB`: the
job-status WebSocket's sign-in and connect), so a flood of one kind never queues the other, and
the calls of one kind run side by side up to the pool's size. Each pool thread keeps its own
database connection (CONN_MAX_AGE), tidied before and after each call as Channels does.

    @SOCKETS_DB
    def _watch_pending(user_id): ...

    await _watch_pending(user.pk)
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings
from django.db import close_old_connections


def _with_tidy_connections(function, args, kwargs):
    close_old_connections()
    try:
        return function(*args, **kwargs)
    finally:
        close_old_connections()


class DatabasePool:
    """A decorator making a synchronous function awaitable on this pool's threads."""

    def __init__(self, name: str, threads: int):
        self.name = name
        # Threads start as work arrives, up to `threads`; work beyond waits in the pool's queue.
        self.executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix=name)

    def __call__(self, function):
        @functools.wraps(function)
        async def on_pool(*args, **kwargs):
            context = contextvars.copy_context()
            return await asyncio.get_running_loop().run_in_executor(
                self.executor, context.run, _with_tidy_connections, function, args, kwargs
            )

        on_pool.sync = function
        return on_pool


PROXY_DB = DatabasePool("proxy-db", settings.PROXY_DB_THREADS)
SOCKETS_DB = DatabasePool("sockets-db", settings.SOCKETS_DB_THREADS)
