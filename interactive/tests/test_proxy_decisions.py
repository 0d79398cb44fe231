"""The proxy's reused decisions and per-user pace (interactive/proxy_decisions.py), on a clock
the test moves."""

import asyncio

from interactive.proxy_decisions import DecisionCache, RequestBudget


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def test_a_decision_is_reused_for_its_lifetime_and_made_once_for_simultaneous_askers():
    clock, made = Clock(), []

    async def decide():
        made.append(clock.now)
        await asyncio.sleep(0.01)
        return f"decision {len(made)}"

    cache = DecisionCache(lambda: 2.0, clock=clock)

    async def scenario():
        together = await asyncio.gather(*(cache.get("k", decide) for _ in range(10)))
        clock.now += 1.9
        reused = await cache.get("k", decide)
        other = await cache.get("other", decide)
        clock.now += 0.2  # past the first decision's two seconds
        fresh = await cache.get("k", decide)
        return together, reused, other, fresh

    together, reused, other, fresh = asyncio.run(scenario())
    assert together == ["decision 1"] * 10 and reused == "decision 1"
    assert other == "decision 2" and fresh == "decision 3"


def test_no_lifetime_means_every_request_is_decided_and_a_failure_is_not_kept():
    calls = []

    async def failing():
        calls.append(1)
        raise RuntimeError("database gone")

    async def scenario():
        cache = DecisionCache(lambda: 0)
        results = []
        for _ in range(2):
            try:
                await cache.get("k", failing)
            except RuntimeError as exc:
                results.append(str(exc))
        return results

    assert asyncio.run(scenario()) == ["database gone"] * 2 and len(calls) == 2


def test_the_pace_allows_a_burst_then_refills_at_its_rate_per_key():
    clock = Clock()
    budget = RequestBudget(lambda: 10.0, lambda: 3, clock=clock)
    assert [budget.take("alice") for _ in range(4)] == [True, True, True, False]
    assert budget.take("bob")  # a key of its own
    assert budget.seconds_until_next("alice") == 0.1
    clock.now += 0.1
    assert budget.take("alice") and not budget.take("alice")
    clock.now += 60  # never more than the burst saved up
    assert [budget.take("alice") for _ in range(4)] == [True, True, True, False]


def test_held_requests_get_turns_in_arrival_order_and_none_past_the_longest_wait():
    clock = Clock()
    budget = RequestBudget(lambda: 10.0, lambda: 2, clock=clock)
    turns = [budget.reserve("alice", longest_wait=0.35) for _ in range(6)]
    # Two at once (the burst), then one each tenth of a second, up to 0.35 s away; then none.
    assert [round(turn, 3) if turn is not None else None for turn in turns] == [0, 0, 0.1, 0.2, 0.3, None]
    clock.now += 0.3  # the three held turns have come; the bucket is back at zero
    assert round(budget.reserve("alice", longest_wait=0.35), 3) == 0.1
