"""The ledger: append-only, never negative, idempotent, weights, lots, expiry."""

from datetime import timedelta

import pytest
from django.db import connection, transaction
from django.db.utils import DatabaseError
from django.utils import timezone

from credits import weights
from credits.actions import ledger
from credits.actions.grants import default_campaign
from credits.models import CampaignDay, CreditLot, EntryKind, LedgerEntry, LedgerIsAppendOnly
from credits.tasks import expire_credits

pytestmark = pytest.mark.django_db


def _grant(user, amount, key="g1", campaign=None):
    campaign = campaign or default_campaign()
    entry, _ = ledger.grant(user.pk, amount, key=key, grant_kind="signup", campaign_id=campaign.pk)
    return entry


def _assert_consistent(user):
    assert ledger.balance(user.pk) == ledger.sum_of_entries(user.pk)
    lots = sum(CreditLot.objects.filter(account__user=user).values_list("remaining", flat=True))
    assert lots == ledger.balance(user.pk)


def test_balance_is_the_sum_and_a_spend_takes_what_the_weight_says(alice):
    _grant(alice, 5000)
    entry = ledger.spend(alice.pk, 100, gpu_type="a100", idempotency_key="usage:1")
    # A100 burns 3.125 credits per GPU-second: 100 s cost 313 credits (rounded up).
    assert entry.amount == -313 and entry.covered_gpu_seconds == 100 and entry.kind == EntryKind.SPEND
    assert ledger.balance(alice.pk) == 5000 - 313
    _assert_consistent(alice)


def test_a_spend_takes_at_most_the_balance_and_says_what_it_covered(alice):
    _grant(alice, 1000)
    entry = ledger.spend(alice.pk, 10_000, gpu_type="h100", idempotency_key="usage:big")
    # 1000 credits at 5 per H100-second cover 200 s.
    assert entry.covered_gpu_seconds == 200 and entry.amount == -1000
    assert ledger.balance(alice.pk) == 0
    assert ledger.spend(alice.pk, 10, gpu_type="h100", idempotency_key="usage:next") is None
    _assert_consistent(alice)


def test_a_partial_cover_never_takes_credit_for_a_second_it_did_not_cover(alice):
    _grant(alice, 10)
    entry = ledger.spend(alice.pk, 100, gpu_type="a100", idempotency_key="usage:odd")
    # 10 credits / 3.125 = 3.2: 3 whole A100-seconds, which cost 9.375 -> 10 credits.
    assert entry.covered_gpu_seconds == 3 and entry.amount == -10


def test_a_retried_spend_returns_the_same_entry(alice):
    _grant(alice, 5000)
    first = ledger.spend(alice.pk, 60, gpu_type="rtx4090", idempotency_key="usage:7")
    again = ledger.spend(alice.pk, 60, gpu_type="rtx4090", idempotency_key="usage:7")
    assert again.pk == first.pk
    assert LedgerEntry.objects.filter(kind="spend").count() == 1 and ledger.balance(alice.pk) == 4940


def test_a_key_of_another_account_is_refused(alice, bob):
    _grant(alice, 100, key="shared")
    with pytest.raises(ledger.LedgerError):
        ledger.spend(bob.pk, 1, gpu_type="rtx4090", idempotency_key="shared")


def test_a_grant_is_written_once_per_key(alice):
    _grant(alice, 5000)
    _, created = ledger.grant(alice.pk, 5000, key="g1", grant_kind="signup", campaign_id=default_campaign().pk)
    assert created is False and ledger.balance(alice.pk) == 5000


def test_an_unknown_gpu_type_is_refused_and_changes_nothing(alice):
    _grant(alice, 100)
    with pytest.raises(weights.NoBurnWeight):
        ledger.spend(alice.pk, 1, gpu_type="v100", idempotency_key="usage:v")
    assert ledger.balance(alice.pk) == 100 and not LedgerEntry.objects.filter(kind="spend").exists()


def test_a_newer_weight_applies_from_its_moment(alice, admin_user):
    _grant(alice, 5000)
    weights.BurnWeight.objects.create(gpu_type="a100", credits_per_gpu_second="4", effective_from=timezone.now())
    entry = ledger.spend(alice.pk, 10, gpu_type="a100", idempotency_key="usage:w")
    assert entry.amount == -40 and str(entry.credits_per_gpu_second) == "4.000000"


def test_entries_cannot_be_changed_or_deleted_by_the_model(alice):
    entry = _grant(alice, 100)
    entry.amount = 1_000_000
    with pytest.raises(LedgerIsAppendOnly):
        entry.save()
    with pytest.raises(LedgerIsAppendOnly):
        entry.delete()


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the trigger is PostgreSQL's")
def test_postgresql_refuses_update_and_delete_of_entries(alice):
    entry = _grant(alice, 100)
    statements = (
        "UPDATE credits_ledgerentry SET amount = 9 WHERE id = %s",
        "DELETE FROM credits_ledgerentry WHERE id = %s",
    )
    for statement in statements:
        with pytest.raises(DatabaseError, match="append-only"), transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(statement, [entry.pk])
    # A queryset update skips the model's guard; the trigger still refuses it.
    with pytest.raises(DatabaseError, match="append-only"), transaction.atomic():
        LedgerEntry.objects.filter(pk=entry.pk).update(amount=5)
    assert LedgerEntry.objects.get(pk=entry.pk).amount == 100


def test_spends_take_the_credit_that_expires_first_and_expiry_writes_the_rest_off(alice, settings):
    campaign = default_campaign()
    old = _grant(alice, 300, key="old")
    _grant(alice, 1000, key="new")
    # The first grant is older: it expires before the second.
    CreditLot.objects.filter(entry=old).update(expires_at=timezone.now() + timedelta(days=1))
    ledger.spend(alice.pk, 100, gpu_type="rtx4090", idempotency_key="usage:a")
    assert CreditLot.objects.get(entry=old).remaining == 200
    CreditLot.objects.filter(entry=old).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert expire_credits() == 1
    assert expire_credits() == 0  # a lot expires once
    expiry = LedgerEntry.objects.get(kind=EntryKind.EXPIRY)
    assert expiry.amount == -200 and ledger.balance(alice.pk) == 1000 - 0
    _assert_consistent(alice)
    day = CampaignDay.objects.get(campaign=campaign)
    assert (day.granted, day.spent, day.expired) == (1300, 100, 200)


def test_a_spend_never_uses_credit_past_its_expiry_even_before_the_beat(alice):
    entry = _grant(alice, 500)
    CreditLot.objects.filter(entry=entry).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert ledger.spend(alice.pk, 10, gpu_type="rtx4090", idempotency_key="usage:late") is None
    assert ledger.balance(alice.pk) == 0
    _assert_consistent(alice)


def test_grants_expire_after_the_setting(alice, settings):
    settings.CREDIT_EXPIRY_DAYS = 90
    entry = _grant(alice, 10)
    assert entry.expires_at - entry.created_at == timedelta(days=90)


def test_adjustments_need_a_reason_and_never_take_the_balance_below_zero(alice, admin_user):
    _grant(alice, 100)
    with pytest.raises(ledger.LedgerError):
        ledger.adjust(alice.pk, 50, actor=admin_user, reason=" ", key="adj:0")
    with pytest.raises(ledger.LedgerError):
        ledger.adjust(alice.pk, -101, actor=admin_user, reason="fraud", key="adj:1")
    ledger.adjust(alice.pk, -40, actor=admin_user, reason="double grant", key="adj:2")
    ledger.adjust(alice.pk, 500, actor=admin_user, reason="outage", key="adj:3")
    assert ledger.balance(alice.pk) == 560
    _assert_consistent(alice)


def test_reversals_undo_a_spend_or_what_is_left_of_a_grant_once(alice, admin_user):
    grant = _grant(alice, 100)
    spend = ledger.spend(alice.pk, 30, gpu_type="rtx4090", idempotency_key="usage:r")
    back = ledger.reverse(spend.pk, actor=admin_user, reason="job failed on our side")
    assert back.amount == 30 and ledger.balance(alice.pk) == 100
    taken = ledger.reverse(grant.pk, actor=admin_user, reason="fraud")
    assert taken.amount == -70 and ledger.balance(alice.pk) == 30
    assert ledger.reverse(grant.pk, actor=admin_user, reason="again").pk == taken.pk
    with pytest.raises(ledger.LedgerError):
        ledger.reverse(taken.pk, actor=admin_user, reason="a reversal of a reversal")
    _assert_consistent(alice)
