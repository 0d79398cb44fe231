"""Spot runs' money (billing/spot.py): a share of the price by time window, no included hours or
credits, a preempted run's notice unbilled, and no free notice for preempting oneself."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from billing.actions.charging import charge
from billing.models import UsageRecord
from jobs.models import Job
from plans.catalog import plan_for
from plans.models import RateCardSpotMultiplier
from plans.rates import rates_for_plan
from plans.spot import seconds_by_window

pytestmark = pytest.mark.django_db
EVENING = datetime(2026, 6, 15, 21, 0, tzinfo=UTC)  # an hour of day, then night from 22:00
_job_ids = itertools.count(880_000)


def _run(user, *, start=EVENING, seconds=7200, gpus=2, state="COMPLETED", qos="spot", nodes="gpu-a100-01"):
    job = Job.objects.create(owner=user, qos=qos, nodes=nodes, state="COMPLETED", start_time=start, gpu_type="a100")
    return UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=next(_job_ids),
        run_start=start,
        run_end=start + timedelta(seconds=seconds),
        gpu_type="a100",
        user=user,
        job=job,
        state=state,
        qos=qos,
        seconds=seconds,
        gpu_count=gpus,
        gpu_seconds=gpus * seconds,
    )


def _charged(record) -> UsageRecord:
    assert charge(record.pk) is True
    record.refresh_from_db()
    return record


def _shares(user, moment=EVENING):
    rates = rates_for_plan(plan_for(user), moment)
    return rates, rates.spot_multiplier("a100", "day"), rates.spot_multiplier("a100", "night")


@pytest.mark.pure
def test_a_runs_seconds_split_between_windows_add_up_exactly():
    assert seconds_by_window(EVENING, EVENING + timedelta(hours=2)) == {"day": 3600, "night": 3600}
    # Across midnight and into the morning: 22:00-06:00 is night, in one piece.
    late = datetime(2026, 6, 15, 23, 30, tzinfo=UTC)
    assert seconds_by_window(late, late + timedelta(hours=8)) == {"night": 6.5 * 3600, "day": 1.5 * 3600}
    assert seconds_by_window(EVENING, EVENING) == {"night": 0, "day": 0}


def test_a_spot_run_pays_each_windows_share_of_the_price_and_no_included_hours(alice):
    rates, day, night = _shares(alice)
    assert day < 1 and night < day  # the shipped cards: cheapest at night
    record = _charged(_run(alice))
    assert record.amount_gpu == 2 * (3600 * day + 3600 * night) * rates.gpu_price("a100")
    assert record.amount == record.amount_gpu + record.amount_memory + record.amount_nvme
    assert (record.included_gpu_seconds, record.credit_gpu_seconds, record.billable_gpu_seconds) == (0, 0, 14400)
    assert "day x" in record.note and "night x" in record.note
    # The same run outside spot takes the plan's included hours first and costs the full price.
    plain = _charged(_run(alice, qos="pro"))
    assert plain.included_gpu_seconds + plain.billable_gpu_seconds == 14400 and plain.amount_gpu != record.amount_gpu
    assert plain.amount_gpu == plain.billable_gpu_seconds * rates.gpu_price("a100")


def test_a_preempted_runs_notice_is_not_billed_when_the_pool_took_the_gpus_back(alice, settings):
    settings.SPOT_GRACE_SECONDS = 120
    rates, day, _night = _shares(alice, datetime(2026, 6, 15, 12, 0, tzinfo=UTC))
    noon = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
    record = _run(alice, start=noon, seconds=600, state="PREEMPTED")
    # No job started on its node: a reservation's or a maintenance window's start took it back.
    record = _charged(record)
    assert (record.billable_gpu_seconds, record.unbilled_grace_gpu_seconds) == (2 * 480, 2 * 120)
    assert record.amount_gpu == 2 * 480 * day * rates.gpu_price("a100")
    assert "not billed" in record.note


def test_a_job_that_took_the_gpus_voids_the_free_notice_whoever_owns_it(alice, bob, settings):
    """The waiver went void only for the owner's own preempting job: a second account earned it."""
    settings.SPOT_GRACE_SECONDS = 120
    noon = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
    for hour, owner in enumerate((alice, bob)):
        start = noon + timedelta(hours=hour)
        record = _run(alice, start=start, seconds=600, state="PREEMPTED")
        Job.objects.create(owner=owner, qos="pro", nodes="gpu-a100-01", start_time=start + timedelta(seconds=560))
        record = _charged(record)
        assert (record.billable_gpu_seconds, record.unbilled_grace_gpu_seconds) == (2 * 600, 0), owner
    # A job on another node took nothing of this run's: the waiver holds.
    other = _run(alice, start=noon + timedelta(hours=3), seconds=600, state="PREEMPTED", nodes="gpu-a100-02")
    Job.objects.create(owner=bob, qos="pro", nodes="gpu-a100-01", start_time=noon + timedelta(hours=3, seconds=590))
    assert _charged(other).unbilled_grace_gpu_seconds == 2 * 120
    # A job on a node range that holds the run's node: Slurm's compressed host list.
    ranged = _run(alice, start=noon + timedelta(hours=4), seconds=600, state="PREEMPTED", nodes="gpu-a100-02")
    Job.objects.create(
        owner=bob, qos="pro", nodes="gpu-a100-[01-02]", start_time=noon + timedelta(hours=4, seconds=590)
    )
    assert _charged(ranged).unbilled_grace_gpu_seconds == 0


def test_a_card_without_spot_shares_charges_the_full_price(alice):
    rates = rates_for_plan(plan_for(alice), EVENING)
    RateCardSpotMultiplier.objects.filter(card__code=rates.card).delete()
    record = _charged(_run(alice))
    assert record.amount_gpu == 2 * 7200 * rates.gpu_price("a100") * Decimal(1)
    assert record.amount_gpu > 0


def test_a_running_spot_jobs_estimate_uses_the_same_shares(alice):
    from billing.costs import job_costs

    start = EVENING + timedelta(minutes=30)  # 30 min of day, then 30 of night by 22:30
    job = Job.objects.create(
        owner=alice, qos="spot", state="RUNNING", start_time=start, gpu_type="a100",
        tres_per_node="gres/gpu:a100:2", nodes="gpu-a100-01", gpu_count=2,
    )  # fmt: skip
    now = start + timedelta(hours=1)
    rates, day, night = _shares(alice, start)
    cost = job_costs([job], now=now)[job.pk]
    assert cost.is_estimate and cost.detail.included_gpu_seconds == 0
    assert cost.cost_so_far == 2 * (1800 * day + 1800 * night) * rates.gpu_price("a100")
