"""Data over a lowered quota (datasets/over_quota.py): the owner is marked and told once, the
data stays readable, nothing new fits, and after the grace period the admins' page lists it
and an admin may delete its versions; back under the quota the mark goes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone
from django.utils.formats import date_format

from conftest import subscribe
from datasets import over_quota
from datasets.models import Dataset, VersionState

pytestmark = pytest.mark.django_db(transaction=True)


def _url(version) -> str:
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/"


def test_a_downgrade_freezes_the_data_and_lists_it_for_deletion_after_the_grace(
    alice, admin_user, api_client_for, ready, tus_for, settings
):
    settings.DATASET_OVER_QUOTA_GRACE_DAYS = 30
    assert over_quota.mark_over_quota() == {"marked": 0, "cleared": 0}  # Pro: 500 GB, a few bytes used
    subscribe(alice, "free")  # no dataset quota at all
    now = timezone.now()
    assert over_quota.mark_over_quota(now) == {"marked": 1, "cleared": 0}
    assert over_quota.mark_over_quota(now) == {"marked": 0, "cleared": 0}  # told once
    assert len(mail.outbox) == 1 and (now + timedelta(days=30)).strftime("%Y-%m-%d") in mail.outbox[0].body
    photos = Dataset.objects.get(pk=ready.dataset_id)
    assert photos.over_quota_since == now
    # Frozen: readable, and nothing new fits.
    assert api_client_for(alice).get(_url(ready)).status_code == 200
    assert tus_for(alice, photos).create("more.bin", 1).status_code == 413
    page = Client()
    page.force_login(alice)
    body = page.get(f"/datasets/{photos.pk}/").content.decode()
    assert "data-over-quota" in body and date_format(now + timedelta(days=30), "DATE_FORMAT") in body
    # In the grace period an admin may not delete; the admins' page shows it as in grace.
    assert api_client_for(admin_user).delete(_url(ready)).status_code == 403
    page.force_login(admin_user)
    listing = page.get("/datasets/over-quota/")
    assert listing.status_code == 200 and [row["dataset"].pk for row in listing.context["grace"]] == [photos.pk]
    # Past it: listed for deletion, and an admin deletes a version as the owner could.
    Dataset.objects.filter(pk=photos.pk).update(over_quota_since=now - timedelta(days=31))
    assert [row["dataset"].pk for row in page.get("/datasets/over-quota/").context["listed"]] == [photos.pk]
    assert api_client_for(admin_user).delete(_url(ready)).status_code in (200, 204)
    ready.refresh_from_db()
    assert ready.state == VersionState.DELETED
    # Under the quota again: the mark goes.
    assert over_quota.mark_over_quota() == {"marked": 0, "cleared": 1}
    assert Dataset.objects.get(pk=photos.pk).over_quota_since is None


def test_the_admins_page_is_the_admins_alone(alice, bob):
    page = Client()
    for user in (alice, bob):
        page.force_login(user)
        assert page.get("/datasets/over-quota/").status_code == 403
