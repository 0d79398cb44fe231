"""Charging usage records to drafts (billing/actions/charging.py), on PostgreSQL: the article's run
through charge(), included hours running out across records, Enterprise prices, the free
plan, NVMe above the plan's, idempotency, and a month already issued."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import Client
from django.utils import timezone

from billing.actions import charging
from billing.actions.charging import charge
from billing.models import Invoice, UsageRecord
from billing.pricing import quote
from conftest import subscribe
from plans.catalog import plan_for
from plans.models import Plan, PlanGpuType
from plans.rates import rates_for_plan

pytestmark = pytest.mark.django_db

_job_ids = itertools.count(5_000_000)
# Mid-month, so a run and its end stay in one billing month.
JUNE = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def no_credits(request, monkeypatch):
    """Credits cover nothing unless a test says so: these tests are about the plan and the
    prices (the credits seam has its own tests below)."""
    if "credits" not in request.node.name:
        monkeypatch.setattr(charging, "apply_credits", lambda *args, **kwargs: (0, None))


@pytest.fixture
def payg(db):
    """A plan with nothing included and list prices: the article's customer."""
    plan = Plan.objects.create(code="payg", name="Pay as you go", qos="normal", priority=1, max_job_minutes=600)
    PlanGpuType.objects.create(plan=plan, gpu_type="a100", max_concurrent=4)
    PlanGpuType.objects.create(plan=plan, gpu_type="h100", max_concurrent=2)
    return plan


def usage(user, *, end=JUNE, seconds=1800, gpu_type="a100", gpus=1, shards=0, memory_gbs=0, nvme_gb=0, source=None):
    if source is None:
        source = "shards" if shards else ("telemetry" if memory_gbs else "none")
    return UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=next(_job_ids),
        run_start=end - timedelta(seconds=seconds),
        run_end=end,
        gpu_type=gpu_type,
        user=user,
        state="COMPLETED",
        seconds=seconds,
        gpu_count=gpus,
        gpu_seconds=gpus * seconds,
        shards=shards,
        gpu_memory_gb_seconds=Decimal(memory_gbs),
        gpu_memory_source=source,
        nvme_gb=nvme_gb,
        nvme_gb_seconds=nvme_gb * seconds,
    )


def charged(record) -> UsageRecord:
    assert charge(record.pk) is True
    record.refresh_from_db()
    return record


def test_the_articles_run_comes_to_8_564_exactly_through_charge(alice, payg):
    subscribe(alice, "payg")
    record = charged(usage(alice, memory_gbs=24 * 1800, nvme_gb=500))
    assert record.amount_gpu == Decimal("2.70")
    assert record.amount_memory == Decimal("0.864")
    assert record.amount_nvme == Decimal("5.00")
    assert record.amount == Decimal("8.564")
    # The same figures as the pricing core's quote at the same rates.
    expected = quote("a100", 1, 1800, gpu_memory_gb=24, nvme_gb=500, rates=rates_for_plan(plan_for(alice), JUNE))
    assert record.amount == expected.total
    assert (record.plan, record.rate_card.code) == ("payg", "list")
    assert (record.gpu_price, record.memory_price, record.nvme_price) == (
        Decimal("0.0015"),
        Decimal("0.00002"),
        Decimal("0.02"),
    )
    assert (record.included_gpu_seconds, record.credit_gpu_seconds, record.billable_gpu_seconds) == (0, 0, 1800)
    assert record.invoice.period == JUNE.date().replace(day=1) and record.invoice.is_draft
    assert record.charged_at is not None and record.note == ""


def test_charging_twice_changes_nothing(alice, payg):
    subscribe(alice, "payg")
    record = charged(usage(alice, memory_gbs=43200))
    before = UsageRecord.objects.filter(pk=record.pk).values().get()
    assert charge(record.pk) is False
    assert UsageRecord.objects.filter(pk=record.pk).values().get() == before
    assert Invoice.objects.filter(user=alice).count() == 1


def test_included_hours_run_out_across_records_and_the_rest_is_overage(alice):
    # Pro: 100 A100-hours included. 99 h, then a 2 h run: 1 h included, 1 h billed.
    first = charged(usage(alice, seconds=99 * 3600, end=JUNE))
    assert (first.included_gpu_seconds, first.billable_gpu_seconds, first.amount) == (99 * 3600, 0, 0)
    second = charged(usage(alice, seconds=2 * 3600, end=JUNE + timedelta(hours=3), memory_gbs=2 * 3600 * 10))
    assert (second.included_gpu_seconds, second.billable_gpu_seconds) == (3600, 3600)
    assert second.amount_gpu == 3600 * Decimal("0.0015")
    # The memory of the billable half only: 72,000 GB-s x 1/2 x $0.00002.
    assert second.amount_memory == Decimal("0.72")
    third = charged(usage(alice, seconds=600, end=JUNE + timedelta(hours=4)))
    assert (third.included_gpu_seconds, third.billable_gpu_seconds) == (0, 600)
    assert second.invoice_id == third.invoice_id == first.invoice_id


def test_enterprise_pays_its_own_gpu_prices_and_list_memory(alice):
    subscribe(alice, "enterprise")
    record = charged(usage(alice, gpu_type="h100", gpus=2, seconds=1000, memory_gbs=100_000))
    assert record.gpu_price == Decimal("0.004")
    assert record.amount_gpu == Decimal("8.000")
    assert record.amount_memory == Decimal("2.00000")
    assert record.plan == "enterprise" and record.included_gpu_seconds == 0


def test_the_free_plan_never_bills_and_says_when_the_cap_was_passed(alice):
    subscribe(alice, "free")
    within = charged(usage(alice, gpu_type="rtx4090", seconds=9 * 3600, nvme_gb=100))
    assert (within.amount, within.included_gpu_seconds, within.note) == (0, 9 * 3600, "")
    beyond = charged(usage(alice, gpu_type="rtx4090", seconds=2 * 3600, end=JUNE + timedelta(hours=3)))
    assert beyond.amount == 0 and beyond.billable_gpu_seconds == 0
    assert "beyond" in beyond.note and "not billed" in beyond.note


def test_nvme_is_billed_only_above_the_plans_included_gb(alice):
    # Pro includes a 500 GB cache; an RTX 4090 run (no included hours) with 800 GB pays 300 GB.
    record = charged(usage(alice, gpu_type="rtx4090", seconds=3600, nvme_gb=800))
    assert record.amount_nvme == 300 * Decimal("0.02")
    within = charged(usage(alice, gpu_type="rtx4090", seconds=3600, nvme_gb=500, end=JUNE + timedelta(hours=2)))
    assert within.amount_nvme == 0


def test_a_shard_run_pays_memory_and_draws_on_included_hours_only_of_its_type(alice, payg):
    # Pro includes A100 hours: 3 of 10 shards for 1 h takes 1,080 s of them, bills nothing.
    covered = charged(usage(alice, gpus=0, shards=3, seconds=3600, memory_gbs=12 * 3600))
    assert (covered.included_gpu_seconds, covered.billable_gpu_seconds, covered.amount) == (1080, 0, 0)
    # An RTX 4090 shard run on Pro (no 4090 hours): all its memory at the memory price.
    billed = charged(usage(alice, gpu_type="rtx4090", gpus=0, shards=2, seconds=100, memory_gbs=800))
    assert billed.included_gpu_seconds == 0
    assert billed.gpu_price == billed.memory_price == Decimal("0.00002")
    assert billed.amount == billed.amount_memory == Decimal("0.016")


def test_usage_of_a_month_already_issued_goes_on_the_next_months_draft(alice, payg):
    subscribe(alice, "payg")
    june = Invoice.objects.create(user=alice, period=JUNE.date().replace(day=1))
    Invoice.objects.filter(pk=june.pk).update(status=Invoice.Status.ISSUED, number="GP-2026-990001")
    record = charged(usage(alice, memory_gbs=0))
    assert record.invoice.period.month == 7 and record.invoice.is_draft


def test_credits_cover_before_billing_when_the_ledger_spends(alice, payg, monkeypatch):
    subscribe(alice, "payg")
    calls = []

    def spend(user_id, gpu_type, gpu_seconds, idempotency_key, *, job_uuid=None, group_id=None):
        calls.append((user_id, gpu_type, gpu_seconds, idempotency_key, group_id))
        return 500, 77

    monkeypatch.setattr(charging, "apply_credits", spend)
    record = charged(usage(alice, seconds=1800, memory_gbs=1800 * 10))
    assert calls == [(alice.pk, "a100", 1800, f"usage-record:{record.pk}", None)]
    assert (record.credit_gpu_seconds, record.credit_entry_id, record.billable_gpu_seconds) == (500, 77, 1300)
    assert record.amount_gpu == 1300 * Decimal("0.0015")
    # The memory of the billable share: 18,000 GB-s x 1300/1800 x $0.00002 = $0.26.
    assert record.amount_memory == Decimal("0.26")


def test_credits_through_the_real_ledger_pay_first_name_the_job_and_never_go_negative(alice, payg):
    from credits.actions import ledger
    from credits.models import LedgerEntry
    from jobs.models import Job

    subscribe(alice, "payg")
    # 1,000 credits are RTX 4090 GPU-seconds; an A100 second burns 3.125 of them: 320 s.
    ledger.grant(alice.pk, 1000, key="charging-test", grant_kind="signup", campaign_id=None)
    job = Job.objects.create(owner=alice, name="credit-run", state="COMPLETED")
    record = usage(alice, seconds=1800)
    UsageRecord.objects.filter(pk=record.pk).update(job=job)
    record = charged(record)
    assert (record.credit_gpu_seconds, record.billable_gpu_seconds) == (320, 1480)
    assert record.amount_gpu == 1480 * Decimal("0.0015")
    entry = LedgerEntry.objects.get(pk=record.credit_entry_id)
    assert entry.reference == ledger.job_reference(job.uuid) and entry.amount == -1000
    assert ledger.balance(alice.pk) == 0 == ledger.sum_of_entries(alice.pk)
    # The job page says what credits paid.
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "1,000 credits covered 320 GPU-seconds of this job" in page
    # Charging again spends nothing more; a second run finds no credits left.
    assert charge(record.pk) is False or ledger.balance(alice.pk) == 0
    second = charged(usage(alice, seconds=60))
    assert (second.credit_gpu_seconds, second.credit_entry_id, second.billable_gpu_seconds) == (0, None, 60)
    assert LedgerEntry.objects.filter(account__user_id=alice.pk, kind="spend").count() == 1


def test_credits_do_not_pay_for_a_gpu_type_without_a_burn_weight(alice, payg, monkeypatch):
    from credits.actions import ledger
    from credits.weights import NoBurnWeight

    def no_weight(*args, **kwargs):
        raise NoBurnWeight("mi300x")

    monkeypatch.setattr(ledger, "spend", no_weight)
    assert charging.apply_credits(alice.pk, "mi300x", 100, "k") == (0, None)


def test_a_record_without_a_price_is_left_uncharged(alice):
    record = usage(alice, gpu_type="b200")
    with pytest.raises(charging.ChargeError):
        charge(record.pk)
    record.refresh_from_db()
    assert record.invoice_id is None and record.amount == 0


def test_the_price_book_gives_rates_for_plans_answer_and_a_price_change_applies_from_its_date(alice, make_card):
    later = datetime(2026, 7, 1, tzinfo=UTC)
    make_card("list", later, {"a100": Decimal("0.0020"), "h100": Decimal("0.0050")}, memory=Decimal("0.00003"))
    book = charging.PriceBook()
    for code in ("pro", "enterprise"):
        subscribe(alice, code)
        plan = plan_for(alice)
        for moment in (JUNE, later + timedelta(days=1)):
            rates, card = book.rates(plan, moment)
            assert rates == rates_for_plan(plan, moment)
            assert (card.code, card.effective_from) == (rates.card, rates.effective_from)
    # A run that started before the change keeps the old card's prices; one after, the new.
    subscribe(alice, "pro")
    before = charged(usage(alice, end=later + timedelta(minutes=10), seconds=3600))
    after = charged(usage(alice, end=later + timedelta(hours=2), seconds=3600))
    assert (before.gpu_price, before.rate_card.effective_from < later) == (Decimal("0.0015"), True)
    assert (after.gpu_price, after.rate_card.effective_from) == (Decimal("0.0020"), later)


def test_a_new_enterprise_card_does_not_reprice_runs_that_started_before_its_date(alice, make_card):
    """Enterprise's prices are dated now (they used to be undated plan rows, and a change
    repriced every run not yet charged): a run that started before the new card keeps the old
    card's price even when charged after it; one that started after pays the new price."""
    later = datetime(2026, 7, 1, tzinfo=UTC)
    make_card("enterprise", later, {"a100": Decimal("0.003"), "h100": Decimal("0.005"), "rtx4090": Decimal("0.0005")})
    subscribe(alice, "enterprise")
    before = charged(usage(alice, end=later + timedelta(minutes=10), seconds=3600))
    after = charged(usage(alice, end=later + timedelta(hours=2), seconds=3600))
    assert (before.gpu_price, before.amount_gpu) == (Decimal("0.0025"), Decimal("9.00"))
    assert (before.rate_card.code, before.rate_card.effective_from < later) == ("enterprise", True)
    assert (after.gpu_price, after.amount_gpu) == (Decimal("0.003"), Decimal("10.80"))
    assert (after.rate_card.code, after.rate_card.effective_from) == ("enterprise", later)


def test_a_card_missing_the_runs_gpu_type_leaves_it_uncharged_naming_card_and_type(alice, make_card):
    later = datetime(2026, 7, 1, tzinfo=UTC)
    make_card("enterprise", later, {"a100": Decimal("0.003")})  # written around the admin's check
    subscribe(alice, "enterprise")
    record = usage(alice, end=later + timedelta(hours=2), seconds=3600, gpu_type="h100")
    with pytest.raises(charging.ChargeError, match="rate card 'enterprise' has no price for 'h100'"):
        charge(record.pk)
    record.refresh_from_db()
    assert record.invoice_id is None


def test_a_run_is_priced_by_the_plan_held_when_it_started_not_by_a_later_switch(alice, bob):
    """Enterprise, 2 x H100, switched to Free while it ran: still billed at Enterprise's H100
    price (it used to be metered at $0 as a Free run). Bob, who did not switch, pays the same."""
    from plans.actions import subscriptions
    from plans.models import Plan

    start = timezone.now() + timedelta(minutes=1)
    for person in (alice, bob):
        subscriptions.change(person, Plan.objects.get(code="enterprise"), at=start)
    subscriptions.change(alice, Plan.objects.get(code="free"), at=start + timedelta(minutes=2))

    def run(user):
        end = start + timedelta(minutes=5)
        return charged(usage(user, end=end, seconds=240, gpu_type="h100", gpus=2))

    switched, stayed = run(alice), run(bob)
    assert stayed.plan == "enterprise" and stayed.amount_gpu == Decimal("0.004") * 480
    assert switched.plan == "enterprise"
    assert switched.amount == stayed.amount > 0
