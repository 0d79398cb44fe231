"""Data stored beyond the plan after the plan allows less (a downgrade, a group's plan ended, a
pay-afterwards account without an approved limit).

Nothing is deleted for it: what is stored stays readable and mountable, and nothing new can be
added (every upload and registration is checked against the quota: datasets/quota.py). An owner
over quota is marked (`over_quota_since` on each of their datasets) and told once, with the date
by which to delete enough or change the plan; DATASET_OVER_QUOTA_GRACE_DAYS after that mark their
datasets are listed for deletion on the admins' page (an admin deletes versions as the owner
could). Back under the quota, the mark goes.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from accounts.access import is_admin
from datasets.models import Dataset
from datasets.queries import may_write
from datasets.quota import describe, quota_bytes, used_bytes
from groups.models import MANAGING_ROLES
from groups.queries import owned_by

log = logging.getLogger(__name__)


def grace() -> timedelta:
    return timedelta(days=settings.DATASET_OVER_QUOTA_GRACE_DAYS)


def mark_over_quota(now: datetime | None = None) -> dict[str, int]:
    """Mark owners over their quota (and tell them once), clear those back under it."""
    now = now or timezone.now()
    marked = cleared = 0
    owners = Dataset.objects.values_list("user_id", "group_id").distinct().order_by()
    for user_id, group_id in owners:
        sample = Dataset.objects.filter(**owned_by(user_id, group_id)).select_related("user", "group").first()
        used, allowed = used_bytes(sample), quota_bytes(sample)
        theirs = Dataset.objects.filter(**owned_by(user_id, group_id))
        if used > allowed:
            since = theirs.filter(over_quota_since__isnull=False).order_by("over_quota_since")
            first = since.values_list("over_quota_since", flat=True).first()
            if first is None:
                theirs.update(over_quota_since=now)
                _tell(sample, used, allowed, now)
                marked += 1
            else:  # a dataset made since keeps the owner's clock: the grace is the owner's
                theirs.filter(over_quota_since__isnull=True).update(over_quota_since=first)
        elif theirs.filter(over_quota_since__isnull=False).update(over_quota_since=None):
            cleared += 1
    return {"marked": marked, "cleared": cleared}


def listed_for_deletion(now: datetime | None = None) -> QuerySet[Dataset]:
    """Datasets whose owner has been over quota for the whole grace period."""
    now = now or timezone.now()
    return Dataset.objects.filter(over_quota_since__lte=now - grace()).select_related("user", "group")


def listed_on(dataset: Dataset) -> datetime | None:
    """When the dataset is (or was) listed for deletion; None while its owner is within quota."""
    return dataset.over_quota_since + grace() if dataset.over_quota_since else None


def is_listed_for_deletion(dataset: Dataset, now: datetime | None = None) -> bool:
    """An admin may delete its versions, as its owner could (see the module)."""
    listed = listed_on(dataset)
    return listed is not None and listed <= (now or timezone.now())


def may_delete_versions(user, dataset: Dataset) -> bool:
    """Its writers, and an admin once it is listed for deletion."""
    return may_write(user, dataset) or (is_admin(user) and is_listed_for_deletion(dataset))


def in_grace(now: datetime | None = None) -> QuerySet[Dataset]:
    now = now or timezone.now()
    return Dataset.objects.filter(over_quota_since__gt=now - grace()).select_related("user", "group")


def _tell(dataset: Dataset, used: int, allowed: int, now: datetime) -> None:
    if dataset.group_id:
        addresses = list(
            dataset.group.memberships.filter(left_at__isnull=True, role__in=MANAGING_ROLES)
            .exclude(user__email="")
            .values_list("user__email", flat=True)
        )
    else:
        addresses = [dataset.user.email] if dataset.user.email else []
    if not addresses:
        return
    by = now + grace()
    body = (
        f"The datasets of {dataset.owner_label} hold {describe(used)}, more than the {describe(allowed)} the plan "
        f"allows now. They stay readable and usable by jobs, and nothing new can be added. Unless enough is deleted "
        f"or the plan allows more by {by:%Y-%m-%d}, they are listed for deletion by the pool's admins.\n"
        f"{settings.SITE_URL}/datasets/\n"
    )

    def send():
        try:
            send_mail("GPU pool: your datasets are over the plan's quota", body, None, addresses)
        except Exception:
            log.exception("the over-quota e-mail for %s failed", dataset.owner_label)

    transaction.on_commit(send)
