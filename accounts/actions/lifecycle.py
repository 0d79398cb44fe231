"""An account that is deactivated, reactivated, deleted, or changes plan or role, and what
follows from it: the cluster account held or restored, the audit log, and (through the
signals below) the apps above, which stop the person's jobs and close their live sockets.

Entry points: `deactivate`/`reactivate` (admins' tools call them with the acting admin),
and the model signals in accounts/receivers.py, which route a plain `user.save()` (Django
admin, shell) through the same steps.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from accounts.models import Profile
from accounts.signals import account_deactivated, plan_changed
from accounts.tasks import lock_cluster_account, lock_cluster_user, provision_user
from audit.log import record
from foundation.enqueue import delay_or_run
from plans.actions import subscriptions
from plans.models import Plan, Subscription

log = logging.getLogger(__name__)


def deactivate(user, actor=None, reason: str = "") -> bool:
    """Deactivate `user`; False when the account was not active. Conditional, so two admins
    pressing the button at once deactivate it once."""
    with transaction.atomic():
        updated = get_user_model().objects.filter(pk=user.pk, is_active=True).update(is_active=False)
        if updated:
            after_deactivation(user.pk, actor, reason)
    user.is_active = False
    return bool(updated)


def reactivate(user, actor=None, reason: str = "") -> bool:
    with transaction.atomic():
        updated = get_user_model().objects.filter(pk=user.pk, is_active=False).update(is_active=True)
        if updated:
            after_reactivation(user.pk, actor, reason)
    user.is_active = True
    return bool(updated)


def after_deactivation(user_id: int, actor, reason: str = "") -> None:
    profile = Profile.objects.select_related("user").get(user_id=user_id)
    record(
        actor,
        "account.deactivate",
        f"user:{profile.user.username}",
        before={"is_active": True},
        after={"is_active": False},
        reason=reason,
        parameters={"cluster_user": profile.cluster_username or ""},
    )
    account_deactivated.send(sender=Profile, user_id=user_id)
    if profile.cluster_username:
        profile_id = profile.pk
        transaction.on_commit(lambda: delay_or_run(lock_cluster_account, profile_id))


def after_reactivation(user_id: int, actor, reason: str = "") -> None:
    profile = Profile.objects.select_related("user").get(user_id=user_id)
    record(
        actor,
        "account.reactivate",
        f"user:{profile.user.username}",
        before={"is_active": False},
        after={"is_active": True},
        reason=reason,
    )
    if profile.cluster_username:
        profile_id = profile.pk
        # Provisioning again unlocks the Unix account and restores the association.
        transaction.on_commit(lambda: delay_or_run(provision_user, profile_id))


def before_deletion(user, actor=None) -> None:
    """The user row is about to go (jobs keep their rows, ownerless): stop what runs now and
    lock the cluster account by name, since no row will be left to re-read."""
    profile = Profile.objects.filter(user_id=user.pk).first()
    cluster_user = profile.cluster_username if profile else None
    record(
        actor,
        "account.delete",
        f"user:{user.get_username()}",
        before={"is_active": user.is_active},
        after={},
        parameters={"cluster_user": cluster_user or ""},
    )
    if user.is_active:
        account_deactivated.send(sender=Profile, user_id=user.pk)
    if cluster_user:
        transaction.on_commit(lambda: delay_or_run(lock_cluster_user, cluster_user))


def after_profile_change(profile: Profile, before: dict, actor=None) -> None:
    """A role change: admins hold every plan's QOS, users their plan's, so Slurm must be
    told (accounts/receivers.py calls this on save)."""
    after = profile.current_terms()
    record(actor, "account.change", f"user:{profile.user.username}", before=before, after=after)
    _reprovision_on_commit(profile.pk)


def start_default_subscription(user) -> None:
    """A new account is on the default plan (settings.DEFAULT_PLAN) from its first moment."""
    plan = Plan.objects.filter(code=settings.DEFAULT_PLAN).first()
    if plan is None:
        log.error("the default plan %r does not exist; %s has no subscription", settings.DEFAULT_PLAN, user)
        return
    subscriptions.change(user, plan)


def change_plan(user, plan_code: str, *, actor=None, status: str = Subscription.Status.ACTIVE, reason: str = ""):
    """Subscribe `user` to a plan (or pause/resume/cancel with `status`): a new history row,
    an audit entry, and the association provisioned again on commit so Slurm enforces the
    new plan's QOS and limits. Raises Plan.DoesNotExist or SubscriptionError."""
    plan = Plan.objects.get(code=plan_code)
    with transaction.atomic():
        changed = subscriptions.change(user, plan, status)
        if changed is None:
            return None  # already so: no entry, no Slurm change
        ended = changed.ended
        record(
            actor,
            "subscription.change",
            f"user:{user.get_username()}",
            before={"plan": ended.plan.code, "status": ended.status} if ended else {},
            after={"plan": plan.code, "status": status},
            reason=reason,
        )
        _reprovision_on_commit(Profile.objects.get(user=user).pk)
        before = ended.plan.code if ended else None
        transaction.on_commit(
            lambda: plan_changed.send(sender=Profile, user_id=user.pk, before=before, after=plan.code, status=status)
        )
    return changed.started


def _reprovision_on_commit(profile_id: int) -> None:
    profile = Profile.objects.select_related("user").get(pk=profile_id)
    if profile.cluster_username and profile.user.is_active:
        transaction.on_commit(lambda: delay_or_run(provision_user, profile_id))
