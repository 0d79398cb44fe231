"""The plan catalogue as seeded from docs/product.md, and subscription history."""

from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.actions import lifecycle
from audit.models import AuditLog
from plans.actions import subscriptions
from plans.catalog import plan_by_code as plan_for_code
from plans.catalog import plan_for
from plans.models import Plan, Subscription
from plans.slurm_limits import association_terms, qos_limits

pytestmark = pytest.mark.django_db


def test_the_three_plans_of_the_product():
    free, pro, enterprise = (plan_for_code(code) for code in ("free", "pro", "enterprise"))
    assert (free.qos, free.priority, free.gpu_quota, free.monthly_gpu_hours) == ("free", 1000, {"rtx4090": 1}, 10)
    assert free.official_images_only and free.max_job_minutes == 240
    assert pro.monthly_price == Decimal("299.00") and pro.included_gpu_hours == {"a100": 100}
    assert pro.monthly_gpu_hours is None  # included, not a cap: use beyond is billed
    assert pro.included_nvme_gb == 500
    assert enterprise.qos == "premium" and enterprise.priority == 10000
    # Its per-second prices are on the rate card it pays (plans/rate_cards.py), not on the plan.
    assert (enterprise.rate_card, pro.rate_card, free.rate_card) == ("enterprise", "list", "list")


def test_a_new_user_is_on_the_default_plan_from_the_start(settings):
    user = get_user_model().objects.create_user("newcomer", password="x")
    assert Subscription.objects.get(user=user).plan.code == settings.DEFAULT_PLAN == "free"
    assert plan_for(user).code == "free"


def test_a_snapshot_cannot_be_changed(alice):
    snapshot = plan_for(alice)
    with pytest.raises(TypeError):
        snapshot.gpu_quota["h100"] = 8
    with pytest.raises(AttributeError):
        snapshot.qos = "premium"


def test_a_change_ends_the_current_row_and_starts_a_new_one(alice):
    before = Subscription.objects.filter(user=alice).count()
    lifecycle.change_plan(alice, "enterprise", reason="upgrade")
    lifecycle.change_plan(alice, "enterprise")  # already so: nothing recorded
    lifecycle.change_plan(alice, "enterprise", status=Subscription.Status.PAUSED)
    rows = list(Subscription.objects.filter(user=alice).order_by("started_at", "id"))
    assert len(rows) == before + 2
    assert [row.ended_at is None for row in rows] == [False] * (len(rows) - 1) + [True]
    assert (rows[-1].plan.code, rows[-1].status) == ("enterprise", "paused")
    assert plan_for(alice).is_paused
    entries = AuditLog.objects.filter(action="subscription.change", target="user:alice").order_by("created_at", "id")
    assert [entry.after for entry in entries] == [
        {"plan": "enterprise", "status": "active"},
        {"plan": "enterprise", "status": "paused"},
    ]
    assert entries[0].before == {"plan": "pro", "status": "active"} and entries[0].reason == "upgrade"


def test_the_database_allows_one_current_subscription(alice):
    with pytest.raises(IntegrityError), transaction.atomic():
        Subscription.objects.create(user=alice, plan=Plan.objects.get(code="free"), started_at=timezone.now())


def test_unknown_plans_and_statuses_are_refused(alice):
    with pytest.raises(Plan.DoesNotExist):
        lifecycle.change_plan(alice, "platinum")
    with pytest.raises(subscriptions.SubscriptionError):
        lifecycle.change_plan(alice, "free", status="frozen")
    assert plan_for(alice).code == "pro"


def test_a_paused_plan_refuses_jobs(alice, api_client_for):
    from jobs.tests.conftest import GOOD_SPEC

    profile = alice.profile
    profile.cluster_username, profile.provisioned_at = "alice", timezone.now()
    profile.save()
    lifecycle.change_plan(alice, "pro", status=Subscription.Status.PAUSED)
    response = api_client_for(alice).post("/api/v1/jobs/", GOOD_SPEC, format="json")
    assert response.status_code == 403 and "paused" in response.json()["detail"]


def test_what_slurm_is_told_for_each_plan(settings):
    free = plan_for_code("free")
    limits = qos_limits(free)
    assert limits.max_wall_minutes == 240 and limits.priority == 1000 and limits.deny_on_limit
    per_type = {name: count for name, count in limits.max_tres_per_user.items() if name.startswith("gres/gpu:")}
    assert per_type == {f"gres/gpu:{t}": (1 if t == "rtx4090" else 0) for t in settings.GPU_TYPES}
    shards = settings.GPU_TYPES["rtx4090"]["shards_per_gpu"]
    assert limits.max_tres_per_user["gres/shard:rtx4090"] == shards
    terms = association_terms(free, is_admin=False)
    assert (terms.qos, terms.default_qos, terms.gpu_minutes, terms.max_submit_jobs) == (["free"], "free", 600, None)
    admin_terms = association_terms(plan_for_code("enterprise"), is_admin=True)
    assert admin_terms.qos == ["free", "premium", "pro", "spot"] and admin_terms.gpu_minutes is None
