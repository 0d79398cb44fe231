"""Which plan a group held at a moment: whether the group or the member pays for a group run.

A group that holds a plan (groups.models.GroupPlan) pays for the runs charged to it; the rows
are its history, so a run is priced by what the group held when the run started (a plan given
or taken while a run ran changes nothing for that run). Read by billing (charging, invoices).
"""

from __future__ import annotations

from groups.models import GroupPlan
from plans.catalog import PlanSnapshot, snapshot


def history(group_id: int) -> list[GroupPlan]:
    return list(
        GroupPlan.objects.filter(group_id=group_id)
        .select_related("plan")
        .prefetch_related("plan__gpu_types")
        .order_by("started_at", "id")
    )


def _second(moment):
    return moment.replace(microsecond=0) if moment is not None else None


def plan_at(group_id: int, moment, rows: list[GroupPlan] | None = None) -> PlanSnapshot | None:
    """The plan the group held at `moment`, or None (its members pay then).

    Compared by whole seconds: slurmdbd records a run's start in whole seconds, so a plan
    given at 10:00:00.5 holds for a run that started at 10:00:00.9 (recorded 10:00:00), and a
    plan taken back at 10:00:00.5 no longer holds for it. One rule for both ends."""
    held = None
    moment = _second(moment)
    for row in rows if rows is not None else history(group_id):
        ended = _second(row.ended_at)
        if _second(row.started_at) <= moment and (ended is None or ended > moment):
            held = row
    return snapshot(held.plan) if held is not None else None


def current(group_id: int) -> GroupPlan | None:
    return GroupPlan.objects.filter(group_id=group_id, ended_at__isnull=True).select_related("plan").first()


def group_pays(group_id: int) -> bool:
    """Whether the group pays for its group runs now (it holds a plan)."""
    return GroupPlan.objects.filter(group_id=group_id, ended_at__isnull=True).exists()


def paying_groups():
    """The ids of the groups that hold a plan now (a subquery)."""
    return GroupPlan.objects.filter(ended_at__isnull=True).values("group_id")


class GroupPlansHeld:
    """`plan_at` for many groups and moments (a metering pass), each history read once."""

    def __init__(self):
        self._histories: dict[int, list[GroupPlan]] = {}

    def at(self, group_id: int, moment) -> PlanSnapshot | None:
        if group_id not in self._histories:
            self._histories[group_id] = history(group_id)
        return plan_at(group_id, moment, self._histories[group_id])
