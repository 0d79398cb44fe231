"""Many spends at once against one balance, on PostgreSQL with real threads, one connection each."""

from concurrent.futures import ThreadPoolExecutor
from threading import Barrier

import pytest
from django.db import connection

from credits.actions import ledger
from credits.actions.grants import default_campaign
from credits.models import CreditLot, LedgerEntry

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="row locks are PostgreSQL's"),
]
SPENDS = 100
# PostgreSQL's max_connections (100) is shared with the rest of the machine: 25 threads, each
# on its own connection, released together, issue the 100 spends as fast as they can.
THREADS = 25


def _at_once(count: int, work, threads: int = THREADS):
    """Run work(0..count-1) on `threads` threads released together, each on its own connection."""
    threads = min(threads, count)
    barrier = Barrier(threads)

    def run(worker):
        try:
            barrier.wait()
            return [work(index) for index in range(worker, count, threads)]
        finally:
            connection.close()

    with ThreadPoolExecutor(max_workers=threads) as pool:
        return [result for batch in pool.map(run, range(threads)) for result in batch]


def test_a_hundred_concurrent_spends_never_take_the_balance_below_zero_and_lose_no_entry(alice):
    ledger.grant(alice.pk, 1000, key="signup", grant_kind="signup", campaign_id=default_campaign().pk)
    # 100 spends of 37 RTX 4090 GPU-seconds ask for 3,700 credits; 1,000 are there.
    results = _at_once(SPENDS, lambda i: ledger.spend(alice.pk, 37, gpu_type="rtx4090", idempotency_key=f"usage:{i}"))
    written = [entry for entry in results if entry is not None]
    spends = LedgerEntry.objects.filter(kind="spend")
    assert spends.count() == len(written)  # every spend that answered with an entry is in the ledger
    assert sorted(spends.values_list("pk", flat=True)) == sorted(entry.pk for entry in written)
    assert ledger.balance(alice.pk) == 0  # the last spend took what was left, no more
    assert ledger.sum_of_entries(alice.pk) == 0
    assert -sum(entry.amount for entry in written) == 1000
    # 27 spends of 37 (999 credits) and one of the last credit, covering 1 GPU-second.
    assert sorted(entry.covered_gpu_seconds for entry in written) == [1] + [37] * 27
    assert sum(CreditLot.objects.values_list("remaining", flat=True)) == 0


def test_the_same_spend_retried_at_once_is_written_once(alice):
    ledger.grant(alice.pk, 1000, key="signup", grant_kind="signup", campaign_id=default_campaign().pk)
    results = _at_once(20, lambda i: ledger.spend(alice.pk, 10, gpu_type="rtx4090", idempotency_key="usage:same"))
    assert {entry.pk for entry in results} == {LedgerEntry.objects.get(kind="spend").pk}
    assert ledger.balance(alice.pk) == 990 == ledger.sum_of_entries(alice.pk)


def test_grants_and_spends_at_once_keep_the_balance_equal_to_the_sum(alice):
    campaign = default_campaign()

    def work(i):
        if i % 2:
            return ledger.grant(alice.pk, 20, key=f"g{i}", grant_kind="signup", campaign_id=campaign.pk)
        return ledger.spend(alice.pk, 15, gpu_type="rtx4090", idempotency_key=f"s{i}")

    _at_once(60, work)
    assert ledger.balance(alice.pk) == ledger.sum_of_entries(alice.pk) >= 0
    assert sum(CreditLot.objects.values_list("remaining", flat=True)) == ledger.balance(alice.pk)
