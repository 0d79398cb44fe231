"""The monthly GPU-minute reset: once, on the 1st, and never a second budget mid-month."""

from datetime import UTC, datetime

import pytest
import time_machine

from conftest import subscribe
from plans.models import MonthlyUsageReset
from plans.tasks import reset_monthly_usage

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


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
