"""Closing a month: not before the grace period, fee payers without usage invoiced too, twice
is once; and on PostgreSQL, closing while usage is charged loses and doubles nothing."""

import random
import threading
from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import connection

from billing import tasks
from billing.actions import closing, invoicing
from billing.models import Invoice, InvoiceLine, UsageRecord
from billing.tests.invoice_support import at, charge, subscription_history

MARCH, APRIL = date(2026, 3, 1), date(2026, 4, 1)
AFTER_MARCH = at(2026, 4, 1, 3)  # past the 2-hour grace


@pytest.mark.django_db
def test_a_month_closes_only_after_its_grace_period(alice, settings):
    settings.BILLING_CLOSE_GRACE = timedelta(hours=2)
    assert closing.closable_month(at(2026, 4, 1, 1, 59)) == date(2026, 2, 1)
    assert closing.closable_month(at(2026, 4, 1, 2, 0)) == MARCH
    with pytest.raises(ValueError, match="cannot close before"):
        closing.close(MARCH, now=at(2026, 4, 1, 1))


@pytest.mark.django_db
def test_closing_invoices_fee_payers_without_usage_and_twice_is_once(alice, bob, marketer, admin_user):
    subscription_history(alice, ("pro", "active", at(2026, 1, 1)))  # a fee, no usage
    subscription_history(bob, ("pro", "paused", at(2026, 2, 1)))  # paused all month: nothing owed
    subscription_history(marketer, ("free", "active", at(2026, 1, 1)))
    subscription_history(admin_user, ("enterprise", "active", at(2026, 1, 1)))
    charge(admin_user, at(2026, 3, 31, 23, 59))
    charge(admin_user, at(2026, 4, 2))  # April's: stays a draft

    first = closing.close(MARCH, now=AFTER_MARCH)
    assert first.drafts_created == 1 and len(first.issued) == 2
    march = Invoice.objects.filter(period=MARCH)
    assert {(invoice.user, invoice.status, invoice.total) for invoice in march} == {
        (alice, Invoice.Status.ISSUED, Decimal("299.00")),
        (admin_user, Invoice.Status.ISSUED, Decimal("9.00")),
    }
    assert Invoice.objects.get(period=APRIL).status == Invoice.Status.DRAFT

    again = closing.close(MARCH, now=AFTER_MARCH + timedelta(hours=1))
    assert (again.drafts_created, again.issued) == (0, [])
    # A void invoice's redraft is left to an admin: the closer issues nothing more.
    invoicing.void_invoice(march.get(user=alice).pk, admin_user, "test")
    assert closing.close(MARCH, now=AFTER_MARCH).issued == []


@pytest.mark.django_db
def test_the_beat_task_closes_the_last_closable_month(alice, settings):
    subscription_history(alice, ("pro", "active", at(2020, 1, 1)))
    summary = tasks.close_month.apply(kwargs={"period": "2026-03"}).get()
    assert summary == "2026-03: 1 drafts created, 1 issued"
    assert Invoice.objects.get(user=alice, period=MARCH).status == Invoice.Status.ISSUED


@pytest.mark.django_db
def test_stale_drafts_are_refreshed(alice):
    subscription_history(alice, ("enterprise", "active", at(2026, 1, 1)))
    record = charge(alice, at(2026, 3, 5), billable=4000)
    assert closing.refresh_drafts() == 1
    assert Invoice.objects.get(pk=record.invoice_id).total == Decimal("10.00")
    assert closing.refresh_drafts() == 0


def _charge_in_thread(user, moments, barrier, errors):
    try:
        barrier.wait()
        for moment in moments:
            charge(user, moment, billable=random.choice([1, 7, 401, 3601]), gpu_price=Decimal("0.0025"))
    except Exception as exc:  # noqa: BLE001 - reported to the test below
        errors.append(exc)
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
def test_closing_while_usage_is_charged_loses_and_doubles_nothing(alice, bob, admin_user):
    assert connection.vendor == "postgresql", "this test needs PostgreSQL's row locks"
    users = [alice, bob, admin_user]
    for user in users:
        subscription_history(user, ("enterprise", "active", at(2026, 1, 1)))
        for day in (3, 9):  # drafts exist before closing starts
            charge(user, at(2026, 3, day))
    # Each charger sends runs that ended late in March (slurmdbd late) and early in April.
    moments = [at(2026, 3, 31, 20) + timedelta(minutes=7 * n) for n in range(60)]
    barrier, errors = threading.Barrier(len(users) + 1), []
    threads = [threading.Thread(target=_charge_in_thread, args=(user, moments, barrier, errors)) for user in users]

    def close_march():
        try:
            barrier.wait()
            for _ in range(3):
                closing.close(MARCH, now=AFTER_MARCH)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads.append(threading.Thread(target=close_march))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []

    records = UsageRecord.objects.all()
    assert records.count() == len(users) * (2 + len(moments))
    assert not records.filter(invoice__isnull=True).exists()
    for invoice in Invoice.objects.all():
        own = UsageRecord.objects.filter(invoice=invoice)
        stored = list(InvoiceLine.objects.filter(invoice=invoice).order_by("position"))
        if invoice.status == Invoice.Status.ISSUED:
            assert invoice.period == MARCH
            # Frozen lines are exactly what the records on the invoice give: none came after.
            rebuilt = invoicing.lines_for(invoice)
            assert [(line.kind, line.quantity, line.amount) for line in stored] == [
                (line.kind, line.quantity, line.amount) for line in rebuilt
            ]
            assert invoice.total == sum(line.amount for line in stored)
            seconds = sum(line.quantity for line in stored if line.kind == InvoiceLine.Kind.GPU)
            assert seconds == sum(own.values_list("billable_gpu_seconds", flat=True))
        else:
            assert invoice.period == APRIL and invoice.status == Invoice.Status.DRAFT
    # Every March user's invoice was issued; whatever missed it is on April's draft.
    assert Invoice.objects.filter(period=MARCH, status=Invoice.Status.ISSUED).count() == len(users)
    late = records.filter(run_end__lt=at(2026, 4, 1), invoice__period=APRIL).count()
    on_time = records.filter(run_end__lt=at(2026, 4, 1), invoice__period=MARCH).count()
    assert late + on_time == records.filter(run_end__lt=at(2026, 4, 1)).count()


def _uncharged(user, run_end, job_id) -> UsageRecord:
    return UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=job_id,
        run_start=run_end - timedelta(seconds=600),
        run_end=run_end,
        gpu_type="a100",
        user=user,
        state="COMPLETED",
        seconds=600,
        gpu_count=1,
        gpu_seconds=600,
        gpu_memory_gb_seconds=Decimal(6000),
        gpu_memory_source=UsageRecord.MemorySource.TELEMETRY,
    )


@pytest.mark.django_db(transaction=True)
def test_closing_while_billing_charging_runs_puts_every_record_on_one_invoice(alice, bob):
    """The same race with the real charging (billing.actions.charging.charge) in the other threads."""
    from billing.actions import charging

    assert connection.vendor == "postgresql"
    users = [alice, bob]
    ids = {}
    for index, user in enumerate(users):
        subscription_history(user, ("enterprise", "active", at(2026, 1, 1)))
        charging.charge(_uncharged(user, at(2026, 3, 2), 900_000 + index).pk)
        moments = [at(2026, 3, 31, 22) + timedelta(minutes=5 * n) for n in range(40)]
        ids[user.pk] = [_uncharged(user, moment, 910_000 + 100 * index + n).pk for n, moment in enumerate(moments)]
    barrier, errors = threading.Barrier(len(users) + 1), []

    def charge_all(record_ids):
        try:
            barrier.wait()
            for record_id in record_ids:
                charging.charge(record_id)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    def close_march():
        try:
            barrier.wait()
            closing.close(MARCH, now=AFTER_MARCH)
            closing.close(MARCH, now=AFTER_MARCH)
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=charge_all, args=(ids[user.pk],)) for user in users]
    threads.append(threading.Thread(target=close_march))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert errors == []
    assert not UsageRecord.objects.filter(invoice__isnull=True).exists()
    for invoice in Invoice.objects.filter(status=Invoice.Status.ISSUED):
        stored = [(line.kind, line.quantity, line.amount) for line in invoice.lines.order_by("position")]
        assert stored == [(line.kind, line.quantity, line.amount) for line in invoicing.lines_for(invoice)]
        assert invoice.total == sum(amount for _kind, _quantity, amount in stored)
    billed = InvoiceLine.objects.filter(kind=InvoiceLine.Kind.GPU, invoice__status=Invoice.Status.ISSUED)
    drafts = Invoice.objects.filter(status=Invoice.Status.DRAFT)
    for draft in drafts:
        invoicing.refresh_draft(draft.pk)
    all_seconds = sum(InvoiceLine.objects.filter(kind=InvoiceLine.Kind.GPU).values_list("quantity", flat=True))
    records = UsageRecord.objects.all()
    assert all_seconds == sum(r.billable_gpu_seconds + r.credit_gpu_seconds for r in records)
    assert billed.exists()
