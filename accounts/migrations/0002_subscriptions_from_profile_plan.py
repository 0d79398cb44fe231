"""Profile.plan was a string overwritten in place; each user's plan becomes their first
subscription row (plans.Subscription), and the string goes."""

from django.db import migrations
from django.utils import timezone


def to_subscriptions(apps, schema_editor):
    Profile = apps.get_model("accounts", "Profile")
    Plan = apps.get_model("plans", "Plan")
    Subscription = apps.get_model("plans", "Subscription")
    plans = {plan.code: plan for plan in Plan.objects.all()}
    now = timezone.now()
    for profile in Profile.objects.select_related("user"):
        plan = plans.get(profile.plan) or plans["free"]
        if not Subscription.objects.filter(user_id=profile.user_id, ended_at__isnull=True).exists():
            Subscription.objects.create(user_id=profile.user_id, plan=plan, status="active", started_at=now)


def to_profile_plan(apps, schema_editor):
    Profile = apps.get_model("accounts", "Profile")
    Subscription = apps.get_model("plans", "Subscription")
    for subscription in Subscription.objects.filter(ended_at__isnull=True).select_related("plan"):
        Profile.objects.filter(user_id=subscription.user_id).update(plan=subscription.plan.code)


class Migration(migrations.Migration):
    dependencies = [("accounts", "0001_initial"), ("plans", "0002_product_plans")]
    operations = [
        migrations.RunPython(to_subscriptions, to_profile_plan),
        migrations.RemoveField(model_name="profile", name="plan"),
    ]
