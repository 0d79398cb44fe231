"""Invoice lines: plan fees by day (pause, plan change), usage by GPU type, overage, included
hours, credits, the volume discount, the no-telemetry note, rounding; issuing freezes and
numbers without gaps; void."""

from datetime import date
from decimal import Decimal

import pytest
from django.test import Client

from audit.models import AuditLog
from billing.actions import invoicing
from billing.models import Invoice, InvoiceFrozen, InvoiceLine, InvoiceNumber, UsageRecord
from billing.tests.invoice_support import at, charge, subscription_history
from plans.models import Plan

pytestmark = pytest.mark.django_db
MARCH = date(2026, 3, 1)  # 31 days
Kind = InvoiceLine.Kind


def draft_of(user, period=MARCH) -> Invoice:
    invoice, _ = Invoice.objects.get_or_create(user=user, period=period, status=Invoice.Status.DRAFT)
    return invoicing.refresh_draft(invoice.pk)


def lines(invoice, kind=None):
    rows = InvoiceLine.objects.filter(invoice=invoice).order_by("position")
    return list(rows.filter(kind=kind) if kind else rows)


def test_a_whole_month_of_pro_is_the_price(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 5, 10)))
    invoice = draft_of(alice)
    (fee,) = lines(invoice)
    assert (fee.kind, fee.amount, fee.quantity, fee.plan) == (Kind.PLAN_FEE, Decimal("299.00"), 1, "pro")
    assert invoice.total == Decimal("299.00")


def test_a_paused_stretch_is_not_charged_and_each_stretch_is_pro_rata(alice):
    # Paused at 14:00 on the 10th and resumed at 09:00 on the 20th: both days were active for a
    # while, so both are charged; the 11th to the 19th were paused all day.
    subscription_history(
        alice,
        ("pro", "active", at(2026, 2, 1)),
        ("pro", "paused", at(2026, 3, 10, 14)),
        ("pro", "active", at(2026, 3, 20, 9)),
    )
    invoice = draft_of(alice)
    fees = lines(invoice, Kind.PLAN_FEE)
    assert [fee.amount for fee in fees] == [Decimal("96.45"), Decimal("115.74")]  # 299 x 10/31, 299 x 12/31
    assert "1–10 Mar 2026 (10 of 31 days)" in fees[0].description
    assert "20–31 Mar 2026 (12 of 31 days)" in fees[1].description
    (paused,) = lines(invoice, Kind.NOTE)
    assert paused.amount == 0 and paused.quantity == 9 and "not charged" in paused.description
    assert invoice.total == Decimal("212.19")


def test_pausing_over_midnight_every_night_still_pays_every_day(alice):
    """Paused 23:59 to 00:01 each night: every day had an active moment, so the whole month
    is the price (the day used to go to the row holding 00:00: the paused one)."""
    rows = [("pro", "active", at(2026, 2, 1))]
    for day in range(1, 31):
        rows += [("pro", "paused", at(2026, 3, day, 23, 59)), ("pro", "active", at(2026, 3, day + 1, 0, 1))]
    subscription_history(alice, *rows)
    invoice = draft_of(alice)
    assert [fee.amount for fee in lines(invoice, Kind.PLAN_FEE)] == [Decimal("299.00")]
    assert lines(invoice, Kind.NOTE) == []
    assert invoice.total == Decimal("299.00")


def test_a_plan_change_mid_month_gives_one_fee_line_per_plan(alice):
    team = Plan.objects.create(code="team", name="Team", qos="pro", monthly_price=Decimal("99.00"), max_job_minutes=60)
    subscription_history(alice, ("pro", "active", at(2026, 2, 1)), ("team", "active", at(2026, 3, 17, 8)))
    invoice = draft_of(alice)
    fees = lines(invoice, Kind.PLAN_FEE)
    assert [(fee.plan, fee.amount) for fee in fees] == [
        ("pro", Decimal("163.97")),  # Pro held part of the 17th: 299 x 17/31 = 163.9677...
        (team.code, Decimal("47.90")),  # so did Team: 99 x 15/31 = 47.9032...
    ]
    assert invoice.subtotal == invoice.total == Decimal("211.87")


def test_free_and_enterprise_have_no_fee_and_free_bills_nothing(alice, bob):
    subscription_history(alice, ("free", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 3, 12), gpu_type="rtx4090", plan="free", billable=0, included=7200, gpu_price=Decimal(0))
    invoice = draft_of(alice)
    (included,) = lines(invoice)
    assert included.kind == Kind.INCLUDED and included.amount == 0 and included.quantity == 7200
    assert "2.00 h of 10 h included in Free" in included.description
    assert invoice.total == 0
    subscription_history(bob, ("enterprise", "active", at(2026, 1, 1)))
    assert lines(draft_of(bob)) == []


def test_pro_usage_beyond_the_plan_is_overage_at_list_prices_by_gpu_type(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    price = Decimal("0.0015")
    charge(alice, at(2026, 3, 4), plan="pro", included=360_000, billable=0, gpu_price=price)
    charge(
        alice,
        at(2026, 3, 5),
        plan="pro",
        billable=1800,
        gpu_price=price,
        memory_gb_seconds=Decimal(43200),
        nvme_gb_seconds=500 * 1800,
    )
    charge(alice, at(2026, 3, 6), plan="pro", gpu_type="rtx4090", billable=1000, gpu_price=Decimal("0.0005"))
    invoice = draft_of(alice)
    by_kind = [(line.kind, line.gpu_type, line.amount) for line in lines(invoice)]
    assert by_kind == [
        (Kind.PLAN_FEE, "", Decimal("299.00")),
        (Kind.INCLUDED, "a100", Decimal("0")),
        (Kind.OVERAGE, "a100", Decimal("2.70")),
        (Kind.GPU_MEMORY, "a100", Decimal("0.86")),  # the article's $0.864
        (Kind.NVME, "a100", Decimal("5.00")),
        (Kind.OVERAGE, "rtx4090", Decimal("0.50")),
    ]
    nvme = lines(invoice, Kind.NVME)[0]
    assert (nvme.quantity, nvme.unit) == (Decimal(250), "GB-h")
    memory = lines(invoice, Kind.GPU_MEMORY)[0]
    assert memory.quantity == Decimal(43200)
    # The total is the sum of the rounded lines: 8.56 of usage, not 8.564 rounded with the rest.
    assert invoice.total == Decimal("299.00") + Decimal("2.70") + Decimal("0.86") + Decimal("5.00") + Decimal("0.50")


def test_each_line_is_rounded_half_up_and_the_total_is_their_sum(alice):
    subscription_history(alice, ("enterprise", "active", at(2026, 1, 1)))
    # 1 GPU-second at $0.005: half a cent, rounded up, on each of two GPU types.
    charge(alice, at(2026, 3, 2), gpu_type="a100", billable=1, gpu_price=Decimal("0.005"))
    charge(alice, at(2026, 3, 2), gpu_type="h100", billable=1, gpu_price=Decimal("0.005"))
    charge(
        alice,
        at(2026, 3, 3),
        gpu_type="h100",
        billable=0,
        memory_gb_seconds=Decimal(100),
        gpu_price=Decimal("0.005"),
        memory_price=Decimal("0.00004"),
    )
    invoice = draft_of(alice)
    assert [line.amount for line in lines(invoice)] == [Decimal("0.01"), Decimal("0.01"), Decimal("0.00")]
    assert invoice.total == Decimal("0.02")  # the exact sum, 0.014, would round to 0.01


def test_volume_discount_starts_at_exactly_5000_and_10000(alice, bob, admin_user):
    price = Decimal("0.0025")
    for user, seconds, rate, amount in [
        (alice, 1_999_996, 0, 0),  # $4,999.99
        (bob, 2_000_000, Decimal("0.05"), Decimal("-250.00")),  # $5,000.00
        (admin_user, 4_000_000, Decimal("0.10"), Decimal("-1000.00")),  # $10,000.00
    ]:
        subscription_history(user, ("enterprise", "active", at(2026, 1, 1)))
        charge(user, at(2026, 3, 10), billable=seconds, gpu_price=price)
        invoice = draft_of(user)
        discount = lines(invoice, Kind.DISCOUNT)
        if not rate:
            assert discount == [] and invoice.discount == 0
            continue
        assert (discount[0].unit_price, discount[0].amount) == (rate, amount)
        assert invoice.discount == amount and invoice.total == Decimal(seconds) * price + amount


def test_the_card_in_force_when_the_month_starts_governs_its_discount(alice, bob, make_card):
    """Discount tiers are rows of the rate card, read with it: a card dated mid-March or from
    1 April (00:00 in the billing zone) leaves March's discount alone; April takes the April
    card's tiers. Before, the tiers were constants in the code and could not be dated."""
    prices = {"a100": Decimal("0.0025"), "h100": Decimal("0.004"), "rtx4090": Decimal("0.00048")}
    make_card("enterprise", at(2026, 3, 15), prices, discounts=[(Decimal("1000"), Decimal("0.50"))])
    make_card("enterprise", at(2026, 4, 1), prices, discounts=[(Decimal("5000"), Decimal("0.20"))])
    for user in (alice, bob):
        subscription_history(user, ("enterprise", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 31, 23, 59), billable=2_000_000)  # $5,000.00 in March
    charge(bob, at(2026, 4, 1, 0, 1), billable=2_000_000)  # $5,000.00 in April
    (march,) = lines(draft_of(alice), Kind.DISCOUNT)
    assert (march.unit_price, march.amount) == (Decimal("0.05"), Decimal("-250.00"))
    (april,) = lines(draft_of(bob, date(2026, 4, 1)), Kind.DISCOUNT)
    assert (april.unit_price, april.amount) == (Decimal("0.20"), Decimal("-1000.00"))


def test_a_plan_paying_a_card_without_tiers_gets_no_discount(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 10), plan="pro", billable=8_000_000, gpu_price=Decimal("0.0015"))  # $12,000
    assert lines(draft_of(alice), Kind.DISCOUNT) == []


def test_credits_applied_name_their_ledger_entries_and_reduce_the_discount_base(alice):
    subscription_history(alice, ("enterprise", "active", at(2026, 1, 1)))
    price = Decimal("0.0025")
    charge(alice, at(2026, 3, 2), billable=2_000_000, credit=4000, credit_entry_id=41, gpu_price=price)
    charge(alice, at(2026, 3, 3), billable=0, credit=1000, credit_entry_id=42, gpu_price=price)
    invoice = draft_of(alice)
    gpu = lines(invoice, Kind.GPU)[0]
    assert (gpu.quantity, gpu.amount) == (2_005_000, Decimal("5012.50"))
    (credits,) = lines(invoice, Kind.CREDITS)
    assert (credits.amount, credits.credit_entry_ids) == (Decimal("-12.50"), [41, 42])
    assert invoice.credits == Decimal("-12.50")
    # Spend net of credits is $5,000.00: the 5 % discount applies to that.
    assert invoice.discount == Decimal("-250.00")
    assert invoice.total == Decimal("4750.00")


def test_runs_without_telemetry_are_said_to_be_gpu_seconds_only(alice):
    subscription_history(alice, ("enterprise", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 2), billable=600, source=UsageRecord.MemorySource.NONE)
    charge(alice, at(2026, 3, 3), billable=400, source=UsageRecord.MemorySource.NONE)
    charge(alice, at(2026, 3, 4), billable=500, memory_gb_seconds=Decimal(1000))
    (note,) = lines(draft_of(alice), Kind.NOTE)
    assert "GPU-seconds only: no telemetry (2 runs, 1,000 GPU-s" in note.description


def test_issuing_freezes_numbers_without_gaps_and_twice_is_once(alice, bob):
    for user in (alice, bob):
        subscription_history(user, ("pro", "active", at(2026, 1, 1)))
    first = invoicing.issue_invoice(draft_of(alice).pk)
    second = invoicing.issue_invoice(draft_of(bob).pk)
    year = first.issued_at.year
    assert (first.number, second.number) == (f"GP-{year}-000001", f"GP-{year}-000002")
    assert invoicing.issue_invoice(first.pk).number == first.number
    assert InvoiceNumber.objects.get(year=year).last == 2
    assert first.status == Invoice.Status.ISSUED and first.total == Decimal("299.00")
    assert AuditLog.objects.filter(action="invoice.issue", target=f"invoice:{first.number}").count() == 1
    # Usage charged now goes on the next month, never on the issued invoice.
    record = charge(alice, at(2026, 3, 30), plan="pro", billable=100, gpu_price=Decimal("0.0015"))
    assert record.invoice.period == date(2026, 4, 1)
    assert invoicing.refresh_draft(first.pk).total == Decimal("299.00")


def test_an_issued_invoice_and_its_lines_never_change(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    invoice = invoicing.issue_invoice(draft_of(alice).pk)
    invoice.total = Decimal("1.00")
    with pytest.raises(InvoiceFrozen):
        invoice.save()
    with pytest.raises(InvoiceFrozen):
        Invoice.objects.filter(pk=invoice.pk).update(total=Decimal("1.00"))
    with pytest.raises(InvoiceFrozen):
        Invoice.objects.get(pk=invoice.pk).delete()
    with pytest.raises(InvoiceFrozen):
        InvoiceLine.objects.filter(invoice=invoice).update(amount=Decimal("1.00"))
    with pytest.raises(InvoiceFrozen):
        InvoiceLine.objects.filter(invoice=invoice).delete()
    line = lines(invoice)[0]
    line.amount = Decimal("1.00")
    with pytest.raises(InvoiceFrozen):
        line.save()
    stored = Invoice.objects.get(pk=invoice.pk)
    assert stored.total == Decimal("299.00") and lines(stored)[0].amount == Decimal("299.00")


def test_a_zero_invoice_is_paid_when_issued(alice):
    subscription_history(alice, ("free", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 3), gpu_type="rtx4090", plan="free", billable=0, included=60, gpu_price=Decimal(0))
    invoice = invoicing.issue_invoice(draft_of(alice).pk)
    assert (invoice.status, invoice.total) == (Invoice.Status.PAID, 0)
    assert invoice.paid_at == invoice.issued_at


def test_void_needs_a_reason_is_audited_and_only_from_issued(alice, admin_user):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    draft = draft_of(alice)
    with pytest.raises(invoicing.InvoiceStateError):
        invoicing.void_invoice(draft.pk, admin_user, "wrong plan")
    issued = invoicing.issue_invoice(draft.pk)
    with pytest.raises(ValueError, match="reason"):
        invoicing.void_invoice(issued.pk, admin_user, "  ")
    assert Invoice.objects.get(pk=issued.pk).status == Invoice.Status.ISSUED
    void = invoicing.void_invoice(issued.pk, admin_user, "billed the wrong plan")
    assert (void.status, void.void_reason, void.number) == (Invoice.Status.VOID, "billed the wrong plan", issued.number)
    entry = AuditLog.objects.get(action="invoice.void")
    assert (entry.actor, entry.reason, entry.before["status"]) == (admin_user, "billed the wrong plan", "issued")
    with pytest.raises(invoicing.InvoiceStateError):
        invoicing.void_invoice(issued.pk, admin_user, "again")


def test_day_counting_follows_the_billing_zone(alice, settings):
    settings.BILLING_TIME_ZONE = "America/New_York"
    # 02:00 UTC on 10 March is 21:00 on 9 March in New York: the 10th starts paused there.
    from datetime import UTC, datetime

    subscription_history(
        alice, ("pro", "active", at(2026, 2, 1)), ("pro", "paused", datetime(2026, 3, 10, 2, tzinfo=UTC))
    )
    fee = lines(draft_of(alice), Kind.PLAN_FEE)[0]
    assert "1–9 Mar 2026 (9 of 31 days)" in fee.description


def test_a_new_plan_price_is_billed_from_the_next_month_never_the_month_under_way(alice):
    import time_machine

    from billing.actions.closing import fee_payers_without_invoice
    from plans.models import PlanPrice

    subscription_history(alice, ("pro", "active", at(2026, 2, 1)))
    pro = Plan.objects.get(code="pro")
    with time_machine.travel(at(2026, 3, 10, 12)):
        pro.monthly_price = Decimal("349.00")
        pro.save()
        pro.monthly_price = Decimal("0.00")  # changed again the same month: the later word stands
        pro.save()
    assert list(PlanPrice.objects.filter(plan=pro).values_list("effective_from", "monthly_price")) == [
        (date(2026, 4, 1), Decimal("0.00")),
        (date(2000, 1, 1), Decimal("299.00")),
    ]
    # March was under way at 299: the month's closer still bills it although the plan's list
    # price is now 0, and its fee stays 299; April is free.
    assert fee_payers_without_invoice(date(2026, 3, 1)) == [alice.pk]
    assert fee_payers_without_invoice(date(2026, 4, 1)) == []
    charge(alice, at(2026, 3, 20, 12), plan="pro", billable=3600, gpu_price=Decimal("0.0015"))
    march = draft_of(alice)
    assert [fee.amount for fee in lines(march, Kind.PLAN_FEE)] == [Decimal("299.00")]
    # Usage beyond March's Pro (a plan with a fee that month) is overage, as it was then.
    assert len(lines(march, Kind.OVERAGE)) == 1 and lines(march, Kind.GPU) == []
    assert lines(draft_of(alice, date(2026, 4, 1)), Kind.PLAN_FEE) == []


def test_a_price_change_late_on_a_months_last_day_counts_in_the_billing_zone(settings):
    from plans.models import first_of_next_billing_month

    settings.BILLING_TIME_ZONE = "America/New_York"
    # 23:30 on 31 March in New York is already 1 April in UTC: still March's change.
    assert first_of_next_billing_month(at(2026, 3, 31, 23, 30)) == date(2026, 4, 1)
    settings.BILLING_TIME_ZONE = "Asia/Tokyo"
    # 00:30 on 1 April in Tokyo is still 31 March in UTC: April's change, billed from May.
    assert first_of_next_billing_month(at(2026, 4, 1, 0, 30)) == date(2026, 5, 1)


def test_void_and_redraft_bills_the_usage_once_and_the_fee_once(alice, admin_user):
    """Voiding used to forgive the usage, and the next late record opened a new draft of the
    month that billed the whole fee again without it. Now the voided usage moves to one redraft."""
    from billing.actions import closing

    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 5), plan="pro", billable=1000, gpu_price=Decimal("0.0015"))  # $1.50 overage
    issued = invoicing.issue_invoice(draft_of(alice).pk)
    assert issued.total == Decimal("300.50")
    invoicing.void_invoice(issued.pk, admin_user, "wrong overage line")
    redraft = Invoice.objects.get(replaces=issued)
    assert redraft.status == Invoice.Status.DRAFT and redraft.period == MARCH
    assert UsageRecord.objects.filter(invoice=issued).count() == 0
    assert UsageRecord.objects.filter(invoice=redraft).count() == 1
    # A late record of March lands on the redraft too, not on a new draft of its own.
    charge(alice, at(2026, 3, 30), plan="pro", billable=2000, gpu_price=Decimal("0.0015"))  # $3.00
    assert Invoice.objects.filter(user=alice, period=MARCH).exclude(status=Invoice.Status.VOID).count() == 1
    # The closer leaves the redraft to an admin; the admin issues it: fee once, all usage once.
    assert closing.close(MARCH, now=at(2026, 5, 1)).issued == []
    owner = Client()
    owner.force_login(alice)
    assert owner.post(f"/billing/admin/invoices/{redraft.pk}/issue").status_code == 403  # admins only
    assert Invoice.objects.get(pk=redraft.pk).status == Invoice.Status.DRAFT
    client = Client()
    client.force_login(admin_user)
    page = client.get(f"/billing/admin/invoices/{issued.pk}/").content.decode()
    assert "data-redraft" in page
    assert client.post(f"/billing/admin/invoices/{redraft.pk}/issue").status_code == 302
    redraft.refresh_from_db()
    assert redraft.status == Invoice.Status.ISSUED
    assert [fee.amount for fee in lines(redraft, Kind.PLAN_FEE)] == [Decimal("299.00")]
    assert redraft.total == Decimal("299.00") + Decimal("1.50") + Decimal("3.00")
    entry = AuditLog.objects.get(action="invoice.void")
    assert entry.after["redraft"] == redraft.pk and entry.after["usage_records_moved"] == 1


def test_included_hours_follow_the_days_paid(alice):
    """Pro bought for the last day of March used to unlock all 100 A100-hours for $9.65."""
    subscription_history(alice, ("free", "active", at(2026, 1, 1)), ("pro", "active", at(2026, 3, 31, 9)))
    price = Decimal("0.0015")
    charge(alice, at(2026, 3, 31, 20), plan="pro", included=360_000, billable=0, gpu_price=price)
    invoice = draft_of(alice)
    fee = lines(invoice, Kind.PLAN_FEE)
    assert [line.amount for line in fee] == [Decimal("9.65")]  # 299 x 1/31
    allowance = 100 * 3600 * 1 // 31  # 11,612 GPU-seconds for one paid day
    (beyond,) = [line for line in lines(invoice, Kind.OVERAGE) if "paid day" in line.description]
    assert beyond.quantity == 360_000 - allowance and beyond.unit_price == price
    assert beyond.amount == Decimal("522.58")  # 348,388 x $0.0015
    assert "1 paid day of Pro" in beyond.description
    assert invoice.total == Decimal("9.65") + Decimal("522.58")


def test_a_whole_month_of_pro_keeps_all_its_hours(alice):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))
    charge(alice, at(2026, 3, 20), plan="pro", included=360_000, billable=0, gpu_price=Decimal("0.0015"))
    invoice = draft_of(alice)
    assert not [line for line in lines(invoice, Kind.OVERAGE) if "paid day" in line.description]
    assert invoice.total == Decimal("299.00")
