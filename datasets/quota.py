"""The NVMe quota of a dataset's owner: the plan's `dataset_quota_gb` (Pro 500 GB, Enterprise 2 TB),
for a user their own plan, for a group the plan it holds (groups.group_plans; a group without
one has none). Counted against it: every ready version of the owner's datasets, every byte
declared by uploads into versions still open, and versions being registered from shared
storage. GB are 10^9 bytes, as drives are sold.

A higher layer may withhold a user's quota (`register_quota_gate`): billing withholds it from a
plan billed afterwards until an admin approves the account's credit limit, so a plan without a
fee is not 2 TB of storage for anyone who signs up. `quota_refusal` says why, for the refusal."""

from __future__ import annotations

from collections.abc import Callable

from django.db.models import Q, Sum

from datasets.models import OPEN_STATES, Dataset, DatasetVersion, Upload, VersionState
from groups import group_plans
from groups.queries import owned_by
from plans.catalog import plan_for

GB = 10**9

# gate(user, plan) -> why the user's plan's quota is withheld, or "" (registered from above).
QuotaGate = Callable[[object, object], str]
_gates: dict[str, QuotaGate] = {}


def register_quota_gate(name: str, gate: QuotaGate) -> None:
    """Registering a name again replaces the earlier gate (ready() may run more than once)."""
    _gates[name] = gate


def _withheld(user, plan) -> str:
    for gate in list(_gates.values()):
        reason = gate(user, plan)
        if reason:
            return reason
    return ""


def quota_refusal(dataset: Dataset) -> str:
    """Why the owner's quota is withheld ("" when it is not): a user's, never a group's."""
    if dataset.group_id is not None:
        return ""
    return _withheld(dataset.user, plan_for(dataset.user))


def quota_bytes(dataset: Dataset) -> int:
    if dataset.group_id is not None:
        held = group_plans.current(dataset.group_id)
        return (held.plan.dataset_quota_gb if held else 0) * GB
    plan = plan_for(dataset.user)
    return 0 if _withheld(dataset.user, plan) else plan.dataset_quota_gb * GB


def used_bytes(dataset: Dataset) -> int:
    """What the owner's datasets hold or have reserved by open uploads."""
    owner = owned_by(dataset.user_id, dataset.group_id, through="dataset")
    # Ready versions, and versions being registered from shared storage (their size is set,
    # datasets.actions.reserve_import, before a byte is copied).
    stored = (
        DatasetVersion.objects.filter(**owner)
        .filter(Q(state=VersionState.READY) | (Q(state=VersionState.VERIFYING) & ~Q(source_path="")))
        .aggregate(total=Sum("size_bytes"))
    )
    owner = owned_by(dataset.user_id, dataset.group_id, through="version__dataset")
    reserved = (
        Upload.objects.filter(version__state__in=OPEN_STATES, **owner)
        .exclude(state=Upload.State.ABANDONED)
        .aggregate(total=Sum("length"))
    )
    return (stored["total"] or 0) + (reserved["total"] or 0)


def describe(size: int) -> str:
    return f"{size / GB:.2f} GB"
