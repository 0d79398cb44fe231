"""Reading datasets as a given user may. Every dataset a request reaches goes through
`readable_dataset`, so one the caller may not see is the same 404 as one that does not exist.

Who sees what: a user's own datasets; a group's datasets to the group's active members (the
groups app's rule: groups.queries); admins read every dataset (as they read every group and
reservation) but write only their own and their groups'."""

from __future__ import annotations

from django.db.models import Q, QuerySet

from accounts.access import is_admin
from datasets.models import Dataset
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
