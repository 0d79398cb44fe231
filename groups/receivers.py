"""What groups do when something below them changes (accounts send, groups listen)."""

from __future__ import annotations

from allauth.account.signals import user_logged_in
from django.dispatch import receiver

from accounts.oidc import claimed_groups
from accounts.signals import account_deactivated, cluster_identity_changed
from groups import actions
from groups.models import Group


def _sync_groups_of(user_id: int) -> None:
    groups = Group.objects.filter(memberships__user_id=user_id, closed_at__isnull=True)
    actions.slurm_must_learn(*groups.values_list("pk", flat=True).distinct())


@receiver(cluster_identity_changed)
def rewrite_memberships(sender, user_id: int, **kwargs):
    """A user just provisioned (or whose plan's QOS changed) gets their associations in every
    group's account, with the QOS their plan gives."""
    _sync_groups_of(user_id)


@receiver(account_deactivated)
def drop_memberships(sender, user_id: int, **kwargs):
    """A deactivated user's associations leave the groups' accounts (the sync skips inactive
    users); their membership rows stay, for the bills."""
    _sync_groups_of(user_id)


@receiver(user_logged_in)
def apply_groups_claim(sender, request, user, sociallogin=None, **kwargs):
    """Signed in through the institution: its groups claim says which groups the user is in,
    at every sign-in (a group left at the institution is left here)."""
    if sociallogin is not None:
        actions.apply_claimed_groups(user, claimed_groups(sociallogin.account.extra_data))
