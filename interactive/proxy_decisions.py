"""The session proxy's decisions shared between simultaneous requests, and each user's pace.

A notebook page fires a hundred requests at once and a kernel's client polls: deciding each
from the database (interactive/access.py) put one user's flood in front of everybody's
database work. Identical decisions (same host, cookie and bearer token) asked for while one is
being made are made once. With SESSION_PROXY_DECISION_SECONDS above 0 a decision is also reused
that long: a session stopped, or a user signed out everywhere, then still reaches the server for
at most that long (a reused decision whose server does not answer is made again:
interactive/proxy.py).

Each user (or, before anybody is known, each host name) has a bucket of
SESSION_PROXY_BURST requests refilled at SESSION_PROXY_REQUESTS_PER_SECOND; a request finding it
empty waits for its turn (interactive/proxy.py). Both live in the process: with several web
processes each has its own.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable

# Entries kept at most (oldest dropped first): a process's distinct sessions and clients.
MOST_ENTRIES = 10_000


class DecisionCache:
    def __init__(self, seconds: Callable[[], float], *, clock=time.monotonic):
        # Read at each use: settings may change under a running process's tests.
        self.seconds = seconds
        self.clock = clock
        self._entries: OrderedDict[Hashable, tuple[float, object]] = OrderedDict()
        self._pending: dict[Hashable, asyncio.Future] = {}

    async def get(self, key: Hashable, decide: Callable[[], Awaitable[object]]):
        now = self.clock()
        entry = self._entries.get(key) if self.seconds() > 0 else None
        if entry is not None and entry[0] > now:
            return entry[1]
        pending = self._pending.get(key)
        if pending is None:
            # A task of its own: a first asker that goes away does not cancel the others' answer.
            pending = self._pending[key] = asyncio.ensure_future(decide())
            pending.add_done_callback(lambda _done: self._pending.pop(key, None))
        decision = await asyncio.shield(pending)
        lifetime = self.seconds()
        if lifetime <= 0 or (key in self._entries and self._entries[key][0] > self.clock()):
            return decision
        self._entries[key] = (self.clock() + lifetime, decision)
        self._entries.move_to_end(key)
        while len(self._entries) > MOST_ENTRIES:
            self._entries.popitem(last=False)
        return decision

    def forget(self, key: Hashable) -> None:
        self._entries.pop(key, None)


class RequestBudget:
    """A token bucket per key: `take(key)` is False when the key has used its budget."""

    def __init__(self, per_second: Callable[[], float], burst: Callable[[], int], *, clock=time.monotonic):
        self.per_second = per_second
        self.burst = burst
        self.clock = clock
        self._buckets: OrderedDict[Hashable, tuple[float, float]] = OrderedDict()

    def take(self, key: Hashable) -> bool:
        now = self.clock()
        burst, per_second = float(self.burst()), self.per_second()
        tokens, stamp = self._buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - stamp) * per_second)
        allowed = tokens >= 1.0 - 1e-9  # a clock's float steps short of a whole token
        self._buckets[key] = (tokens - 1.0 if allowed else tokens, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > MOST_ENTRIES:
            self._buckets.popitem(last=False)
        return allowed

    def seconds_until_next(self, key: Hashable) -> float:
        tokens, _stamp = self._buckets.get(key, (float(self.burst()), 0.0))
        return max(0.0, (1.0 - tokens) / self.per_second())

    def reserve(self, key: Hashable, *, longest_wait: float) -> float | None:
        """A turn for this request: 0 when the bucket has a token now, else the seconds until
        its turn comes, the token taken in advance (the bucket goes below zero, so the next
        caller's turn comes after this one's: first come, first served, one sleep each). None,
        and nothing taken, when that turn is more than `longest_wait` away."""
        now = self.clock()
        burst, per_second = float(self.burst()), self.per_second()
        tokens, stamp = self._buckets.get(key, (burst, now))
        tokens = min(burst, tokens + (now - stamp) * per_second)
        wait = max(0.0, (1.0 - tokens) / per_second)
        if wait > longest_wait + 1e-9:
            self._buckets[key] = (tokens, now)
            return None
        self._buckets[key] = (tokens - 1.0, now)
        self._buckets.move_to_end(key)
        while len(self._buckets) > MOST_ENTRIES:
            self._buckets.popitem(last=False)
        return wait
