"""Writing a group into Slurm. The task takes an id, re-reads the group and makes Slurm hold
what the rows say now (account, shares, limits, members), so a late, repeated or concurrent
run does the right thing; every outcome is recorded on the group's row."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime

from celery import shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from cluster.accounts import SlurmAccounts
from cluster.errors import SlurmError, SlurmTransientError
from cluster.services import slurm_cli
from groups.models import Allocation, Group, Membership
from groups.slurm_terms import account_spec, allocated_minutes
from plans.catalog import plan_for
from plans.slurm_limits import association_terms

log = logging.getLogger(__name__)


def _backoff(retries: int) -> int:
    return min(600, 15 * 2**retries)


def allocations_in_force(group_id: int, day: date) -> list[Allocation]:
    return list(
        Allocation.objects.filter(
            group_id=group_id, state=Allocation.State.APPROVED, starts_on__lte=day, ends_on__gt=day
        ).order_by("gpu_type", "starts_on")
    )


def _month_start(now: datetime) -> datetime:
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def used_before_reset(accounts: SlurmAccounts, group: Group, allocations: list[Allocation], now: datetime):
    """GPU-minutes by type the group used in each allocation's period before this month's
    usage reset (shards counted as their share of a GPU); {} when no period began earlier."""
    month_start = _month_start(now)
    used: dict[str, int] = {}
    for allocation in allocations:
        period_start = datetime.combine(allocation.starts_on, datetime.min.time(), tzinfo=UTC)
        if period_start >= month_start:
            continue
        held = accounts.allocated_minutes(group.slurm_account, period_start, month_start)
        shards = int(settings.GPU_TYPES[allocation.gpu_type]["shards_per_gpu"])
        gpu_minutes = held.get(f"gres/gpu:{allocation.gpu_type}", 0)
        minutes = gpu_minutes + held.get(f"gres/shard:{allocation.gpu_type}", 0) / shards
        used[allocation.gpu_type] = max(used.get(allocation.gpu_type, 0), int(minutes))
    return used


def _member_terms(membership: Membership):
    profile = membership.user.profile
    return association_terms(plan_for(membership.user), is_admin=profile.is_admin)


def write_group(group: Group, now: datetime | None = None) -> list[str]:
    """Make Slurm hold the group as its rows say; the changes made, in words."""
    now = now or timezone.now()
    accounts = SlurmAccounts(slurm_cli())
    shown = accounts.show([group.slurm_account]).get(group.slurm_account)
    if group.closed_at is not None:
        for user in sorted(shown.users if shown else ()):
            accounts.remove_member(group.slurm_account, user)
        if shown:
            accounts.delete(group.slurm_account)
        return [f"account {group.slurm_account} removed"] if shown else []
    accounts.ensure_parent(group.parent_account, organization=group.organization)
    allocations = allocations_in_force(group.pk, now.astimezone(UTC).date())
    minutes = allocated_minutes(allocations, used_before_reset(accounts, group, allocations, now))
    changes = accounts.ensure(account_spec(group, settings.GPU_TYPES, minutes), organization=group.organization)
    members = (
        Membership.objects.active()
        .filter(group=group, user__is_active=True)
        .exclude(Q(user__profile__cluster_username__isnull=True) | Q(user__profile__cluster_username=""))
        .select_related("user__profile")
    )
    wanted = {}
    for membership in members:
        wanted[membership.user.profile.cluster_username] = membership
    present = shown.users if shown else frozenset()
    for name, membership in sorted(wanted.items()):
        terms = _member_terms(membership)
        accounts.add_member(group.slurm_account, name, terms.qos, terms.default_qos)
        if name not in present:
            changes.append(f"{name} added")
    for name in sorted(present - set(wanted)):
        accounts.remove_member(group.slurm_account, name)
        changes.append(f"{name} removed")
    return changes


@shared_task(bind=True, max_retries=8)
def sync_group(self, group_id: int) -> str:
    group = Group.objects.filter(pk=group_id).first()
    if group is None:
        return "gone"
    try:
        changes = write_group(group)
    except SlurmError as exc:
        Group.objects.filter(pk=group_id).update(slurm_state=Group.SlurmState.ERROR, slurm_error=str(exc)[:2000])
        log.warning("group %s not written to Slurm: %s", group.slug, exc)
        if isinstance(exc, SlurmTransientError) or self.request.retries < 3:
            raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
        return f"error: {exc}"
    Group.objects.filter(pk=group_id).update(
        slurm_state=Group.SlurmState.SYNCED, slurm_error="", synced_at=timezone.now()
    )
    return "; ".join(changes) or "unchanged"


@shared_task(ignore_result=True)
def sync_all_groups() -> int:
    """Beat, hourly and after each month's usage reset: every open group again (the limit a
    month starts with depends on the month), and any left in error."""
    ids = list(Group.objects.filter(closed_at__isnull=True).values_list("pk", flat=True))
    closing = Group.objects.filter(closed_at__isnull=False).exclude(slurm_state=Group.SlurmState.SYNCED)
    ids += list(closing.values_list("pk", flat=True))
    for group_id in ids:
        sync_group.delay(group_id)
    return len(ids)
