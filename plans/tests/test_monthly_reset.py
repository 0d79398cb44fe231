"""The monthly GPU-minute reset: once, on the 1st, and never a second budget mid-month."""

from datetime import UTC, datetime

import pytest
import time_machine

from conftest import subscribe
from plans.models import MonthlyUsageReset
from plans.tasks import reset_monthly_usage

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slurm
def test_the_reset_runs_once_on_the_first_and_only_then(alice, bob, provision, caplog):
    subscribe(alice, "free")
    provision(alice)
    provision(bob)  # on Pro: no budget, so not reset
    with time_machine.travel(datetime(2026, 12, 2, 8, tzinfo=UTC), tick=False):
        assert reset_monthly_usage.run() == "missed"  # not the 1st: budgets are left alone
        assert "did not run on the 1st" in caplog.text
    with time_machine.travel(datetime(2026, 12, 1, 0, 30, tzinfo=UTC), tick=False):
        assert reset_monthly_usage.run() == "reset 1"
        assert reset_monthly_usage.run() == "done already"
    assert MonthlyUsageReset.objects.get().associations == 1


def test_the_month_begins_in_the_billing_zone_as_invoices_do(settings):
    """Reset at UTC's midnight while invoices close at the billing zone's: a free plan's hours
    began again hours before (or after) its month did."""
    settings.BILLING_TIME_ZONE = "America/New_York"
    # 1 December 02:00 UTC is 30 November 21:00 in New York: November's hours are not over.
    with time_machine.travel(datetime(2026, 12, 1, 2, tzinfo=UTC), tick=False):
        assert reset_monthly_usage.run() == "missed"
    settings.BILLING_TIME_ZONE = "Asia/Tokyo"
    # 30 November 23:00 UTC is 1 December 08:00 in Tokyo: December has begun there.
    with time_machine.travel(datetime(2026, 11, 30, 23, tzinfo=UTC), tick=False):
        assert reset_monthly_usage.run() == "reset 0"  # nobody on a capped plan here
    assert str(MonthlyUsageReset.objects.get().month) == "2026-12-01"
