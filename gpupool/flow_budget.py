"""A cap on response bytes in flight, per response and per process, and a stall timeout.

The web server (gpupool/serve.py) writes a body piece only once the socket's buffer has drained
below its high-water mark, so each response holds its buffer and at most one piece. This layer,
outermost in gpupool/asgi.py, adds:
- a process-wide budget (WEB_BYTES_IN_FLIGHT): a piece is sent only once the pieces still
  held by every response of the process leave room for it. A response holds its last piece
  until its next one has gone out (the server has drained the one before) or it ends. When the
  budget is spent, the next piece of any response waits: streaming slows, memory does not grow.
- a stall timeout (HTTP_STREAM_STALL_SECONDS): a piece that could not be sent for that long
  (its client reads nothing) ends the response; the server closes the connection.
"""

from __future__ import annotations

import asyncio


class StalledReader(Exception):
    """The client took nothing of a streamed answer for the stall timeout."""


class Budget:
    """Bytes a process may have in flight. Loop-bound: one web process has one event loop."""

    def __init__(self, limit: int):
        self.limit = limit
        self.held = 0
        self._room = asyncio.Condition()

    async def take(self, size: int) -> int:
        size = min(size, self.limit)  # a piece larger than the whole budget waits for all of it
        async with self._room:
            await self._room.wait_for(lambda: self.held + size <= self.limit)
            self.held += size
        return size

    async def give_back(self, size: int) -> None:
        if size:
            async with self._room:
                self.held -= size
                self._room.notify_all()


class FlowBudget:
    def __init__(self, app, *, limit_bytes: int, stall_seconds: float):
        self.app = app
        self.limit_bytes = limit_bytes
        self.stall_seconds = stall_seconds
        self._budgets: dict[int, Budget] = {}

    def _budget(self) -> Budget:
        # One per event loop (a web process has one; tests may run several).
        loop_id = id(asyncio.get_running_loop())
        budget = self._budgets.get(loop_id)
        if budget is None:
            budget = self._budgets[loop_id] = Budget(self.limit_bytes)
        return budget

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        budget = self._budget()
        held = 0

        async def budgeted_send(message):
            nonlocal held
            body = message.get("body", b"") if message["type"] == "http.response.body" else b""
            if not body:
                await send(message)
                if message["type"] == "http.response.body" and not message.get("more_body"):
                    await budget.give_back(held)
                    held = 0
                return
            taken = await budget.take(len(body))
            try:
                await asyncio.wait_for(send(message), self.stall_seconds)
            except TimeoutError as exc:
                await budget.give_back(taken)
                raise StalledReader from exc
            except BaseException:
                await budget.give_back(taken)
                raise
            # The piece before this one has drained (the server waited for that before writing).
            await budget.give_back(held)
            held = taken if message.get("more_body") else 0
            if not held:
                await budget.give_back(taken)

        try:
            await self.app(scope, receive, budgeted_send)
        finally:
            await budget.give_back(held)
            held = 0
