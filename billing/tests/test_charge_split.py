"""The charge split (billing/charge_split.py) over random run shapes: every GPU-second is covered
once, what is billed is the whole's share to the last 12th place, spot and covers only lower it,
and the article's run comes to $8.564."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from billing.charge_split import NOTHING_COVERED, RunShape, Terms, credits_wanted, split
from billing.pricing import Rates, quote

pytestmark = pytest.mark.pure

RATES = Rates(
    card="test",
    name="Test card",
    effective_from=datetime(2026, 1, 1, tzinfo=UTC),
    gpu_second={"a100": Decimal("0.0015"), "h100": Decimal("0.00400007")},
    gpu_memory_gb_second=Decimal("0.00002"),
    nvme_gb_hour=Decimal("0.02"),
    spot_multipliers={("a100", "day"): Decimal("0.6"), ("a100", "night"): Decimal("0.35")},
)
TWELFTH = Decimal("1e-12")


@st.composite
def runs(draw, spot=None):
    gpu_type = draw(st.sampled_from(["a100", "h100"]))
    seconds = draw(st.integers(0, 40 * 24 * 3600))
    shard_run = draw(st.booleans())
    gpu_count = 0 if shard_run else draw(st.integers(0, 8))
    shards = draw(st.integers(1, 16)) if shard_run else 0
    memory = Decimal(0)  # a run of no time held no memory for any time
    if shard_run:
        memory = shards * 5 * seconds
    elif seconds:
        memory = draw(st.decimals(0, 80 * 8 * seconds, places=3, allow_nan=False, allow_infinity=False))
    is_spot = draw(st.booleans()) if spot is None else spot
    unbilled = draw(st.integers(0, min(seconds, 300))) if is_spot else 0
    windows = None
    if is_spot:
        night = draw(st.integers(0, seconds - unbilled))
        windows = {"night": night, "day": seconds - unbilled - night}
    return RunShape(
        gpu_type=gpu_type,
        seconds=seconds,
        gpu_count=gpu_count,
        shards=shards,
        shards_per_gpu=8,
        gpu_memory_gb_seconds=memory,
        nvme_gb=draw(st.integers(0, 4000)),
        spot_seconds=windows,
        unbilled_seconds=unbilled,
    )


terms = st.builds(
    Terms,
    capped=st.just(False),
    included_nvme_gb=st.integers(0, 1000),
    included_left=st.integers(0, 400 * 3600),
    credits=st.integers(0, 10**7),
)


@settings(max_examples=400, deadline=None)
@given(run=runs(spot=False), cover=terms)
def test_every_gpu_second_is_covered_once_and_the_bill_is_the_uncovered_share_of_the_whole(run, cover):
    whole = split(run, RATES, Terms(included_nvme_gb=cover.included_nvme_gb))
    part = split(run, RATES, cover)
    # Plan hours first, then credits (never for a shard run), the rest billed: each second once.
    assert part.included == min(cover.included_left, run.to_cover)
    assert part.credited == (0 if run.is_shard_run else min(cover.credits, run.to_cover - part.included))
    billed = run.to_cover - part.included - part.credited
    assert part.billable == (0 if run.is_shard_run else billed)
    assert part.credited == min(cover.credits, credits_wanted(run, cover))
    # Each line is the exact rational share of the whole, to the 12th place of the one division.
    if run.to_cover:
        share = Fraction(billed, run.to_cover)
        nvme_beyond = max(0, run.nvme_gb - cover.included_nvme_gb)
        exact = {
            "amount_gpu": 0 if run.is_shard_run else billed * Fraction(RATES.gpu_price(run.gpu_type)),
            "amount_memory": Fraction(run.gpu_memory_gb_seconds) * Fraction(RATES.gpu_memory_gb_second) * share,
            "amount_nvme": Fraction(nvme_beyond * run.seconds) * Fraction(RATES.nvme_gb_hour) / 3600 * share,
        }
        for line, value in exact.items():
            assert abs(Fraction(getattr(part, line)) - value) <= Fraction(TWELFTH) / 2, line
    for line in ("amount_gpu", "amount_memory", "amount_nvme"):
        assert Decimal(0) <= getattr(part, line) <= getattr(whole, line)
    # Nothing covered: the pure quote's lines, exactly (same seconds, same prices).
    if not run.is_shard_run and run.gpu_count:
        priced = quote(
            run.gpu_type,
            run.gpu_count,
            run.seconds,
            Decimal(run.gpu_memory_gb_seconds) / run.seconds if run.seconds else 0,
            run.nvme_gb,
            rates=RATES,
        )
        plain = split(run, RATES, NOTHING_COVERED)
        assert plain.amount_gpu == priced.lines[0].amount
        assert plain.amount_nvme == priced.lines[2].amount
        assert abs(plain.amount_memory - priced.lines[1].amount) <= TWELFTH


@settings(max_examples=300, deadline=None)
@given(run=runs(spot=True), cover=terms)
def test_a_spot_run_takes_no_cover_and_never_pays_more_than_the_full_price(run, cover):
    result = split(run, RATES, cover)
    assert (result.included, result.credited) == (0, 0)
    assert result.billable == run.gpu_count * run.billed_seconds
    assert result.unbilled_grace == run.gpu_count * run.unbilled_seconds
    full = split(
        RunShape(
            run.gpu_type,
            run.seconds,
            run.gpu_count,
            run.shards,
            run.shards_per_gpu,
            run.gpu_memory_gb_seconds,
            run.nvme_gb,
        ),
        RATES,
        Terms(included_nvme_gb=cover.included_nvme_gb),
    )
    assert result.amount <= full.amount + TWELFTH
    # Each window's seconds at its share: the GPU line exactly.
    shares = {"night": Decimal("0.35"), "day": Decimal("0.6")} if run.gpu_type == "a100" else {}
    expected = sum(
        (seconds * shares.get(window, Decimal(1)) for window, seconds in run.spot_seconds.items()), Decimal(0)
    )
    price = RATES.gpu_price(run.gpu_type) if run.gpu_count else Decimal(0)
    assert result.amount_gpu == run.gpu_count * expected * price


@settings(max_examples=200, deadline=None)
@given(run=runs(), cover=terms)
def test_a_free_plans_run_bills_nothing_and_counts_all_of_it_as_included(run, cover):
    result = split(run, RATES, Terms(capped=True, included_left=cover.included_left))
    assert result.amount == 0 and result.included == run.to_cover and result.credited == 0


@settings(max_examples=200, deadline=None)
@given(run=runs(spot=False), cover=terms, more=st.integers(1, 10**6))
def test_more_cover_never_costs_more(run, cover, more):
    less = split(run, RATES, cover)
    hours = split(run, RATES, Terms(cover.capped, cover.included_nvme_gb, cover.included_left + more, cover.credits))
    credit = split(run, RATES, Terms(cover.capped, cover.included_nvme_gb, cover.included_left, cover.credits + more))
    assert hours.amount <= less.amount and credit.amount <= less.amount


def test_the_articles_run_comes_to_8_564():
    run = RunShape("a100", 1800, gpu_count=1, gpu_memory_gb_seconds=24 * 1800, nvme_gb=500)
    assert split(run, RATES).amount == Decimal("8.564")


def test_a_reservations_unused_gpu_seconds_are_what_is_held():
    run = RunShape("a100", 3600, gpu_count=2, held_gpu_seconds=5400)
    assert split(run, RATES).amount_gpu == 5400 * Decimal("0.0015")
    with pytest.raises(ValueError):
        RunShape("a100", 3600, gpu_count=2, held_gpu_seconds=7201)


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError):
        RunShape("a100", -1, gpu_count=1)
    with pytest.raises(ValueError):
        RunShape("a100", 60, gpu_count=1, gpu_memory_gb_seconds=1.5)
    with pytest.raises(ValueError):  # the windows must add up to the billed seconds
        RunShape("a100", 60, gpu_count=1, spot_seconds={"day": 30}, unbilled_seconds=0)
