"""The plan's NVMe GB, checked when an upload is created, before any byte: stored versions,
open uploads and the new file's length together."""

import pytest

from datasets.models import Upload
from datasets.quota import GB, used_bytes
from groups.models import Group, GroupPlan, Membership
from plans.models import Plan

pytestmark = pytest.mark.django_db


def _refused_for_quota(answer):
    assert answer.status_code == 413, answer.content
    assert "NVMe quota" in answer.json()["detail"] and "quota" in answer.json()["errors"]


def test_an_upload_over_the_plans_nvme_is_refused_before_any_byte(alice, photos, tus_for, store):
    tus = tus_for(alice, photos)  # alice is on Pro: 500 GB
    _refused_for_quota(tus.create("huge.bin", 500 * GB + 1))
    assert not Upload.objects.exists() and not (store / "staging").exists()
    assert tus.create("fits.bin", 500 * GB).status_code == 201


def test_open_uploads_and_ready_versions_count_against_it(alice, photos, tus_for, settings):
    Plan.objects.filter(code="pro").update(dataset_quota_gb=1)
    tus = tus_for(alice, photos)
    tus.upload("a.bin", b"a" * 1000)
    assert tus.commit().status_code == 202
    from datasets.tasks import verify_version

    verify_version(photos.versions.get().pk)
    assert used_bytes(photos) == 1000
    again = tus_for(alice, photos)
    assert again.create("reserved.bin", GB - 1000 - 10).status_code == 201  # declared, not yet sent
    _refused_for_quota(again.create("one-too-many.bin", 11))
    assert again.create("just-fits.bin", 10).status_code == 201


def test_the_free_plan_has_no_nvme_cache(bob, tus_for):
    from conftest import subscribe
    from datasets import actions

    subscribe(bob, "free")
    dataset = actions.create_dataset(bob, name="free-data")
    _refused_for_quota(tus_for(bob, dataset).create("a.bin", 1))


def test_a_pay_per_use_plan_stores_datasets_though_it_includes_no_nvme(bob, tus_for):
    """Enterprise includes no free NVMe GB (its jobs pay for all they mount) yet stores 2 TB, once an
    admin approved the account's credit limit: before, any sign-up choosing Enterprise (no fee)
    had 2 TB of the shared store."""
    from decimal import Decimal

    from billing.actions.credit_limits import approve_credit_limit
    from billing.models import CreditLimit
    from conftest import subscribe
    from datasets import actions

    subscribe(bob, "enterprise")
    CreditLimit.objects.filter(user=bob).delete()
    assert Plan.objects.get(code="enterprise").included_nvme_gb == 0
    dataset = actions.create_dataset(bob, name="enterprise-data")
    tus = tus_for(bob, dataset)
    refused = tus.create("a.bin", 1)
    assert refused.status_code == 413 and "credit limit approved by an admin" in refused.json()["detail"]
    approve_credit_limit(bob, Decimal("100"), actor=None, reason="contract")
    assert tus.create("a.bin", 2000 * GB).status_code == 201
    _refused_for_quota(tus.create("b.bin", 1))


def test_a_groups_datasets_count_against_the_groups_plan(alice, tus_for):
    from datasets import actions

    lab = Group.objects.create(name="Lab", slug="lab", organization="pool", created_by=alice)
    Membership.objects.create(group=lab, user=alice, role="pi")
    dataset = actions.create_dataset(alice, name="shared", group_id=lab.pk)
    tus = tus_for(alice, dataset)
    _refused_for_quota(tus.create("a.bin", 1))  # no plan held by the group: no cache
    GroupPlan.objects.create(group=lab, plan=Plan.objects.get(code="pro"), started_at="2026-01-01T00:00Z", set_by=alice)
    assert tus.create("a.bin", 400 * GB).status_code == 201
    _refused_for_quota(tus.create("b.bin", 100 * GB + 1))
