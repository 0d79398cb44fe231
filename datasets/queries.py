"""Reading datasets as a given user may. Every dataset a request reaches goes through
`readable_dataset`, so one the caller may not see is the same 404 as one that does not exist.

Who sees what: a user's own datasets; a group's datasets to the group's active members (the
groups app's rule: groups.queries); admins read every dataset (as they read every group and
reservation) but write only their own and their groups'."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from accounts.access import is_admin
from datasets.models import Dataset, DatasetVersion, NodeCopy, VersionState
from groups.models import Membership


class DatasetError(Exception):
    """A refusal: the field at fault, words for the user, and the HTTP status it means."""

    def __init__(self, field_name: str, message: str, status: int = 400):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message
        self.status = status


NOT_FOUND = "No such dataset."


def _member_group_ids(user):
    return Membership.objects.active().filter(user=user, group__closed_at__isnull=True).values("group_id")


def own_datasets(user) -> QuerySet[Dataset]:
    """The user's datasets and those of the open groups they are an active member of."""
    if not getattr(user, "is_authenticated", False):
        return Dataset.objects.none()
    return Dataset.objects.filter(Q(user=user) | Q(group_id__in=_member_group_ids(user))).select_related(
        "user", "group"
    )


def readable_dataset(user, dataset_id) -> Dataset:
    """The dataset if the user may read it; DatasetError 404 otherwise (also for an id that is
    not a number)."""
    try:
        pk = int(dataset_id)
    except (TypeError, ValueError):
        raise DatasetError("dataset", NOT_FOUND, 404) from None
    rows = Dataset.objects.select_related("user", "group") if is_admin(user) else own_datasets(user)
    found = rows.filter(pk=pk).first()
    if found is None:
        raise DatasetError("dataset", NOT_FOUND, 404)
    return found


def may_write(user, dataset: Dataset) -> bool:
    """Whether `user` may add versions to `dataset`: its owner, or an active member of its open group."""
    return own_datasets(user).filter(pk=dataset.pk).exists()


def mountable_versions(user, limit: int = 200):
    """The ready versions the user may mount (jobs.submission.datasets), newest first, each with
    `cached_on`: the nodes whose NVMe holds it."""
    versions = list(
        DatasetVersion.objects.filter(dataset__in=own_datasets(user), state=VersionState.READY)
        .select_related("dataset__group")
        .order_by("dataset__name", "-number")[:limit]
    )
    nodes: dict[int, list[str]] = {}
    for version_id, node in NodeCopy.objects.filter(version__in=versions).values_list("version_id", "node"):
        nodes.setdefault(version_id, []).append(node)
    for version in versions:
        version.cached_on = sorted(nodes.get(version.pk, []))
    return versions
