"""The process's cap on response bytes in flight and the stall timeout (gpupool/flow_budget.py),
with applications and clients made here: a client that takes nothing is a `send` that never
returns."""

import asyncio

import pytest

from gpupool.flow_budget import FlowBudget, StalledReader

PIECE = b"x" * 1000


def _streaming_app(pieces: int):
    async def app(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for _ in range(pieces):
            await send({"type": "http.response.body", "body": PIECE, "more_body": True})
        await send({"type": "http.response.body", "body": b""})

    return app


async def _receive():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_a_finished_response_gives_back_what_it_held():
    async def scenario():
        layer = FlowBudget(_streaming_app(5), limit_bytes=3000, stall_seconds=5)
        sent = []

        async def send(message):
            sent.append(message)

        await layer({"type": "http"}, _receive, send)
        return sent, layer._budget().held

    sent, held = asyncio.run(scenario())
    assert len(sent) == 7 and held == 0


def test_stalled_readers_hold_the_budget_and_others_wait_until_they_are_cut_off():
    async def scenario():
        layer = FlowBudget(_streaming_app(3), limit_bytes=2000, stall_seconds=0.5)
        never = asyncio.Event()

        async def stalled_send(message):
            if message.get("body"):
                await never.wait()  # the client takes nothing

        async def fine_send(message):
            pass

        stalled = [asyncio.ensure_future(layer({"type": "http"}, _receive, stalled_send)) for _ in range(2)]
        await asyncio.sleep(0.1)
        held_by_stalled = layer._budget().held
        fine = asyncio.ensure_future(layer({"type": "http"}, _receive, fine_send))
        await asyncio.sleep(0.2)
        waited = not fine.done()  # the two stalled pieces fill the 2,000 bytes
        results = await asyncio.gather(*stalled, return_exceptions=True)
        await asyncio.wait_for(fine, 2)
        return held_by_stalled, waited, results, layer._budget().held

    held_by_stalled, waited, results, held_after = asyncio.run(scenario())
    assert held_by_stalled == 2000 and waited
    assert all(isinstance(result, StalledReader) for result in results)
    assert held_after == 0


def test_an_application_that_fails_gives_back_its_piece():
    async def failing(scope, receive, send):
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": PIECE, "more_body": True})
        raise RuntimeError("the source broke")

    async def scenario():
        layer = FlowBudget(failing, limit_bytes=3000, stall_seconds=5)

        async def send(message):
            pass

        with pytest.raises(RuntimeError):
            await layer({"type": "http"}, _receive, send)
        return layer._budget().held

    assert asyncio.run(scenario()) == 0
