"""Checks a higher layer adds to every submission, without jobs/ importing it.

billing/ refuses new jobs while a user's budget is spent and held (billing.actions.budgets); it
registers its check here from its AppConfig.ready(). `jobs.actions.submit` runs every check
after the plan's own quota, inside the transaction that holds the user's profile lock, so a
check sees what the previous submission committed. A check refuses by raising
`SubmissionRefused` (a QuotaExceeded: the form shows its message, the API answers 403 with it
as `detail`, like any quota refusal); anything else it raises is a bug and propagates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import JobSpec
from plans.catalog import PlanSnapshot


class SubmissionRefused(QuotaExceeded):
    """A refusal with a message the user may read."""


@dataclass(frozen=True)
class WorkAsked:
    """What a submission asks to run: `runs` runs of `spec` (a sweep's tasks, or one job), each
    up to its time limit. A check that prices work (billing's credit limit) quotes this."""

    spec: JobSpec
    runs: int = 1


# check(user, plan, group, work): `group` is the group the job is charged to, or None; `work`
# what is asked (None where a caller has nothing to price).
SubmissionCheck = Callable[[object, PlanSnapshot, object, WorkAsked | None], None]

_checks: dict[str, SubmissionCheck] = {}


def register_submission_check(name: str, check: SubmissionCheck) -> None:
    """`check(user, plan, group, work)` raises SubmissionRefused to refuse. Registering a name again
    replaces the earlier check (ready() may run more than once in tests)."""
    _checks[name] = check


def run_submission_checks(user, plan: PlanSnapshot, group=None, work: WorkAsked | None = None) -> None:
    for check in list(_checks.values()):
        check(user, plan, group, work)
