"""An account that is deactivated, reactivated, deleted, or changes plan or role, and what
follows from it: the cluster account held or restored, the audit log, and (through the
signals below) the apps above, which stop the person's jobs and close their live sockets.

Entry points: `deactivate`/`reactivate` (admins' tools call them with the acting admin),
and the model signals in accounts/signals.py, which route a plain `user.save()` (Django
admin, shell) through the same steps.
"""

from __future__ import annotations

import logging

from django.contrib.auth import get_user_model
from django.db import transaction
from django.dispatch import Signal

from accounts.models import Profile
from audit.log import record

log = logging.getLogger(__name__)

# Sent inside the transaction that deactivates or deletes a user (kwargs: user_id). Receivers
# write their own rows in that transaction and defer anything external to on_commit.
account_deactivated = Signal()


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
    from accounts.tasks import lock_cluster_account

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
        transaction.on_commit(lambda: _enqueue(lock_cluster_account, profile_id))


def after_reactivation(user_id: int, actor, reason: str = "") -> None:
    from accounts.tasks import provision_user

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
        transaction.on_commit(lambda: _enqueue(provision_user, profile_id))


def before_deletion(user, actor=None) -> None:
    """The user row is about to go (jobs keep their rows, ownerless): stop what runs now and
    lock the cluster account by name, since no row will be left to re-read."""
    from accounts.tasks import lock_cluster_user

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
        transaction.on_commit(lambda: _enqueue(lock_cluster_user, cluster_user))


def after_profile_change(profile: Profile, before: dict, actor=None) -> None:
    """A plan or role change: Slurm must enforce the new one (a downgraded user must not
    keep `premium`), so the association is provisioned again."""
    from accounts.tasks import provision_user

    after = {"plan": profile.plan, "role": profile.role}
    record(actor, "account.change", f"user:{profile.user.username}", before=before, after=after)
    profile = Profile.objects.select_related("user").get(pk=profile.pk)  # the saved instance may be stale
    if profile.cluster_username and profile.user.is_active:
        profile_id = profile.pk
        transaction.on_commit(lambda: _enqueue(provision_user, profile_id))


def _enqueue(task, *args) -> None:
    try:
        task.delay(*args)
    except Exception as exc:  # the broker is down: do it here rather than lose it
        log.warning("could not enqueue %s%s (running it now): %s", task.name, args, exc)
        try:
            task.apply(args=args)
        except Exception:
            log.exception("%s%s failed", task.name, args)
