"""Checks a higher layer adds to every submission, without jobs/ importing it.

billing/ refuses new jobs while a user's budget is spent and held (billing.budgets); it
registers its check here from its AppConfig.ready(). `jobs.actions.submit` runs every check
after the plan's own quota, inside the transaction that holds the user's profile lock, so a
check sees what the previous submission committed. A check refuses by raising
`SubmissionRefused` (a QuotaExceeded: the form shows its message, the API answers 403 with it
as `detail`, like any quota refusal); anything else it raises is a bug and propagates.
"""

from __future__ import annotations

from collections.abc import Callable

from jobs.submission.quota import QuotaExceeded
from plans.catalog import PlanSnapshot


class SubmissionRefused(QuotaExceeded):
    """A refusal with a message the user may read."""


# check(user, plan, group): `group` is the group the job is charged to, or None.
SubmissionCheck = Callable[[object, PlanSnapshot, object], None]

_checks: dict[str, SubmissionCheck] = {}


def register_submission_check(name: str, check: SubmissionCheck) -> None:
    """`check(user, plan, group)` raises SubmissionRefused to refuse. Registering a name again
    replaces the earlier check (ready() may run more than once in tests)."""
    _checks[name] = check


def run_submission_checks(user, plan: PlanSnapshot, group=None) -> None:
    for check in list(_checks.values()):
        check(user, plan, group)
