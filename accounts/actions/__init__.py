"""Accounts' actions (docs/architecture.md, "The skeleton of an app"): here, the writes that
involve a user's identity on the cluster (provisioning); `lifecycle`, an account's plan changes,
deactivation and reactivation; `plan_choice`, the plan a user chooses, pauses and resumes."""

from __future__ import annotations

import re

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.models import ClusterAccount, Profile
from accounts.signals import cluster_identity_changed
from cluster.clusters.registry import primary_cluster_name
from cluster.clusters.services import slurm_cli
from cluster.commands.provisioning import provisioning_backend
from plans.catalog import plan_for
from plans.enforcement import ensure_qos_exist
from plans.slurm_limits import association_terms

# Names that already belong to the system inside the cluster; never hand them out.
RESERVED_NAMES = {
    "root",
    "daemon",
    "bin",
    "sys",
    "sync",
    "games",
    "man",
    "lp",
    "mail",
    "news",
    "uucp",
    "proxy",
    "www-data",
    "backup",
    "list",
    "irc",
    "gnats",
    "nobody",
    "systemd-network",
    "slurm",
    "slurmrest",
    "munge",
    "mysql",
    "admin",
    "_apt",
    "messagebus",
    "sshd",
}


def cluster_username_for(username: str, exists_on_cluster=lambda name: False) -> str:
    """Derive a Unix-safe cluster name from a portal user name, free in the portal and on
    the cluster."""
    base = re.sub(r"[^a-z0-9_-]", "", username.lower())[:24] or "user"
    if not re.match(r"[a-z_]", base):
        base = f"u{base}"
    if base in RESERVED_NAMES:
        base = f"u_{base}"
    candidate, suffix = base, 1
    while Profile.objects.filter(cluster_username=candidate).exists() or exists_on_cluster(candidate):
        suffix += 1
        if suffix > 1000:
            raise RuntimeError(f"no free cluster user name near {base!r}")
        candidate = f"{base}{suffix}"
    return candidate


def check_requested_cluster_name(name: str) -> None:
    """An admin's explicit mapping may name an existing account, but never a system one:
    mapping a portal user to root or the Slurm user would let them run jobs as it."""
    reserved = RESERVED_NAMES | {settings.SLURM_SERVICE_USER}
    if name in reserved:
        raise ValueError(f"{name!r} is a system account and cannot be a portal user's cluster account")


def assign_cluster_username(profile: Profile, preferred: str | None = None, exists_on_cluster=None) -> str:
    if profile.cluster_username:
        return profile.cluster_username
    exists_on_cluster = exists_on_cluster or (lambda name: False)
    name = preferred or cluster_username_for(profile.user.username, exists_on_cluster)
    try:
        with transaction.atomic():
            updated = Profile.objects.filter(pk=profile.pk, cluster_username__isnull=True).update(cluster_username=name)
    except IntegrityError:
        name = cluster_username_for(profile.user.username, exists_on_cluster)
        updated = Profile.objects.filter(pk=profile.pk, cluster_username__isnull=True).update(cluster_username=name)
    profile.refresh_from_db()
    if not updated and not profile.cluster_username:
        raise RuntimeError(f"could not assign a cluster user name to {profile}")
    return profile.cluster_username


def _ensure_user(backend, profile: Profile, name: str, expected_uid, on_claimed, adopt_existing: bool = False):
    """The Unix user and association on the backend's cluster, with the plan's QOS and limits."""
    terms = association_terms(plan_for(profile.user), is_admin=profile.role == "admin")
    # A QOS the association names must exist first (on a cluster nobody synced yet).
    ensure_qos_exist(terms.qos, backend.cli)
    return backend.ensure_user(
        name,
        terms.qos,
        terms.default_qos,
        **terms.as_kwargs(),
        expected_uid=expected_uid,
        adopt_existing=adopt_existing,
        on_claimed=on_claimed,
    )


def provision_on_cluster(profile: Profile, cluster: str) -> ClusterAccount:
    """The user's account on a further cluster: the same cluster user name, that cluster's
    association under SLURM_ACCOUNT with the plan's QOS and limits, that cluster's uid. Idempotent;
    a user of that name the portal did not make there is refused (never adopted). Raises what the
    provisioning backend raises, recorded on the row for admins."""
    if cluster == primary_cluster_name():
        raise ValueError("the portal's own cluster's account is the profile's (accounts.actions.provision)")
    account, _ = ClusterAccount.objects.get_or_create(profile=profile, cluster=cluster)
    if account.provisioned_at is not None:
        return account
    backend = provisioning_backend(settings.PROVISIONING_BACKEND, slurm_cli(cluster), settings.SLURM_ACCOUNT)

    def record_identity(identity) -> None:
        ClusterAccount.objects.filter(pk=account.pk).update(uid=identity.uid, gid=identity.gid)

    try:
        identity = _ensure_user(backend, profile, profile.cluster_username, account.uid, record_identity)
    except Exception as exc:
        ClusterAccount.objects.filter(pk=account.pk).update(error=str(exc)[:2000])
        raise
    ClusterAccount.objects.filter(pk=account.pk).update(
        provisioned_at=timezone.now(), error="", uid=identity.uid, gid=identity.gid
    )
    account.refresh_from_db()
    return account


def provision(profile_id: int, preferred_name: str | None = None, *, adopt_existing: bool = False) -> Profile:
    """Create (or update) the user's cluster identity. Idempotent: safe to run again,
    which is how a plan change or a failed earlier attempt is applied.

    A derived name skips names the cluster already has; an existing account is only ever
    taken over with adopt_existing (an admin's mapping, or the dev cluster's demo seed)."""
    if preferred_name is not None:
        check_requested_cluster_name(preferred_name)
    profile = Profile.objects.select_related("user").get(pk=profile_id)
    backend = provisioning_backend(settings.PROVISIONING_BACKEND, slurm_cli(), settings.SLURM_ACCOUNT)
    derive_around = backend.user_exists if settings.PROVISIONING_BACKEND == "local" else None
    name = assign_cluster_username(profile, preferred_name, derive_around)

    def record_identity(identity) -> None:
        Profile.objects.filter(pk=profile.pk).update(cluster_uid=identity.uid, cluster_gid=identity.gid)

    try:
        identity = _ensure_user(backend, profile, name, profile.cluster_uid, record_identity, adopt_existing)
        if settings.CLUSTER_OPS_GROUP:
            backend.set_operator(name, settings.CLUSTER_OPS_GROUP, member=profile.role == "admin")
    except Exception as exc:
        Profile.objects.filter(pk=profile.pk).update(provisioning_error=str(exc)[:2000])
        raise
    Profile.objects.filter(pk=profile.pk).update(
        provisioned_at=timezone.now(), provisioning_error="", cluster_uid=identity.uid, cluster_gid=identity.gid
    )
    profile.refresh_from_db()
    reprovision_further_clusters(profile)
    cluster_identity_changed.send(sender=Profile, user_id=profile.user_id)
    return profile


def reprovision_further_clusters(profile: Profile) -> list[str]:
    """The plan's QOS and limits written again on every further cluster where the portal made the
    user's account (a plan or role change is the user's on every cluster, not only the portal's
    own: a further cluster's association kept the old plan's QOS, with no cap). Raises what the
    backend raises, recorded on that account's row; the caller's task retries the whole."""
    done = []
    for account in ClusterAccount.objects.filter(profile=profile, provisioned_at__isnull=False).order_by("cluster"):
        cli = slurm_cli(account.cluster)
        backend = provisioning_backend(settings.PROVISIONING_BACKEND, cli, settings.SLURM_ACCOUNT)
        try:
            _ensure_user(backend, profile, profile.cluster_username, account.uid, lambda identity: None)
        except Exception as exc:
            ClusterAccount.objects.filter(pk=account.pk).update(error=str(exc)[:2000])
            raise
        ClusterAccount.objects.filter(pk=account.pk).update(error="")
        done.append(account.cluster)
    return done
