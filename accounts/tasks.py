"""Tasks on a user's cluster identity. Each re-reads the profile and acts on what it finds
now, so a late or repeated run does the right thing."""

from celery import shared_task
from django.conf import settings

from accounts import actions
from accounts.models import ClusterAccount, Profile
from cluster.clusters.registry import further_clusters_taking_jobs
from cluster.clusters.services import slurm_cli
from cluster.commands.provisioning import provisioning_backend
from cluster.errors import SlurmError, SlurmTransientError


def _backoff(retries: int) -> int:
    return min(600, 15 * 2**retries)


@shared_task(bind=True, max_retries=8, default_retry_delay=15)
def provision_user(self, profile_id: int) -> str:
    profile = Profile.objects.select_related("user").get(pk=profile_id)
    if not profile.user.is_active:
        return "inactive"  # deactivated since: the lock task owns the account now
    try:
        actions.provision(profile_id)
    except SlurmTransientError as exc:
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
    return "provisioned"


@shared_task(bind=True, max_retries=12)
def lock_cluster_account(self, profile_id: int) -> str:
    """Hold and cancel the user's jobs, lock the Unix account, delete the association."""
    profile = Profile.objects.select_related("user").get(pk=profile_id)
    if profile.user.is_active or not profile.cluster_username:
        return "active"
    try:
        _lock(profile.cluster_username)
    except SlurmError as exc:
        Profile.objects.filter(pk=profile_id).update(provisioning_error=f"locking the cluster account: {exc}"[:2000])
        if isinstance(exc, SlurmTransientError):
            raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
        raise
    Profile.objects.filter(pk=profile_id).update(provisioned_at=None, provisioning_error="")
    profile.user.refresh_from_db(fields=["is_active"])
    if profile.user.is_active:
        # Reactivated while we locked: provisioning again restores what we just took away.
        provision_user.delay(profile_id)
        return "reactivated"
    return "locked"


@shared_task(bind=True, max_retries=12)
def lock_cluster_user(self, cluster_user: str) -> str:
    """The same for a deleted portal user, known only by the cluster name it had."""
    if Profile.objects.filter(cluster_username=cluster_user, user__is_active=True).exists():
        return "in use"
    try:
        _lock(cluster_user)
    except SlurmTransientError as exc:
        raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
    return "locked"


def _lock(cluster_user: str) -> None:
    """Locked on the portal's own cluster, and on every further cluster that takes jobs where the
    user exists (the portal made an account there at a first job: docs/clusters.md)."""
    provisioning_backend(settings.PROVISIONING_BACKEND, slurm_cli(), settings.SLURM_ACCOUNT).remove_user(cluster_user)
    for cluster in further_clusters_taking_jobs():
        backend = provisioning_backend(settings.PROVISIONING_BACKEND, slurm_cli(cluster.name), settings.SLURM_ACCOUNT)
        if backend.user_exists(cluster_user):
            backend.remove_user(cluster_user)
    # Made again there by the next job after a reactivation (provision_on_cluster).
    ClusterAccount.objects.filter(profile__cluster_username=cluster_user).update(provisioned_at=None)
