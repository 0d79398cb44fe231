"""Writing a group into Slurm. The task takes an id, re-reads the group and makes Slurm hold
what the rows say now (account, shares, limits, members), so a late, repeated or concurrent
run does the right thing; every outcome is recorded on the group's row."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from cluster.accounts import SlurmAccounts
from cluster.errors import SlurmError, SlurmTransientError
from cluster.services import slurm_cli
from groups.models import MANAGING_ROLES, Allocation, Group, Membership
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
        used[allocation.gpu_type] = max(used.get(allocation.gpu_type, 0), _gpu_minutes(held, allocation.gpu_type))
    return used


def _gpu_minutes(held: dict, gpu_type: str) -> int:
    """GPU-minutes of a type from sacct's TRES-minutes, a shard counted as its share of a GPU."""
    shards = int(settings.GPU_TYPES[gpu_type]["shards_per_gpu"])
    return int(held.get(f"gres/gpu:{gpu_type}", 0) + held.get(f"gres/shard:{gpu_type}", 0) / shards)


def record_usage(accounts: SlurmAccounts, group: Group, allocation: Allocation, now: datetime) -> None:
    """What the group has used of `allocation` so far (running jobs up to now), on its row;
    the group's managers are e-mailed once it passes ALLOCATION_WARN_PERCENT."""
    period_start = datetime.combine(allocation.starts_on, datetime.min.time(), tzinfo=UTC)
    used = _gpu_minutes(accounts.allocated_minutes(group.slurm_account, period_start, now), allocation.gpu_type)
    Allocation.objects.filter(pk=allocation.pk).update(used_gpu_minutes=used, usage_read_at=now)
    allocation.used_gpu_minutes = used
    percent = allocation.used_percent or 0
    if percent >= settings.ALLOCATION_WARN_PERCENT and Allocation.objects.filter(
        pk=allocation.pk, warned_at__isnull=True
    ).update(warned_at=now):
        managers = Membership.objects.active().filter(group=group, role__in=MANAGING_ROLES)
        addresses = [address for address in managers.values_list("user__email", flat=True) if address]
        send_mail(
            f"{group.name}: {percent} % of the {allocation.gpu_type} allocation used",
            f"{group.name} has used {used // 60} of its {allocation.approved_gpu_hours} {allocation.gpu_type} "
            f"GPU-hours ({allocation.starts_on} to {allocation.ends_on}). At "
            f"{settings.ALLOCATION_HOLD_PERCENT} % Slurm holds the group's new jobs; ask for more time on the "
            "group's page.",
            None,
            addresses,
            fail_silently=True,  # the page shows the same figure; the warning is not sent twice
        )


def _member_terms(membership: Membership):
    profile = membership.user.profile
    return association_terms(plan_for(membership.user), is_admin=profile.is_admin)


def _active_members(group: Group) -> dict[str, Membership]:
    """Cluster user name -> membership, for active members whose cluster identity exists."""
    members = (
        Membership.objects.active()
        .filter(group=group, user__is_active=True)
        .exclude(Q(user__profile__cluster_username__isnull=True) | Q(user__profile__cluster_username=""))
        .select_related("user__profile")
    )
    return {membership.user.profile.cluster_username: membership for membership in members}


def wanted_account(accounts: SlurmAccounts, group: Group, now: datetime):
    allocations = allocations_in_force(group.pk, now.astimezone(UTC).date())
    before_reset = used_before_reset(accounts, group, allocations, now)
    minutes = allocated_minutes(allocations, before_reset, settings.ALLOCATION_HOLD_PERCENT)
    return account_spec(group, settings.GPU_TYPES, minutes), allocations


def differences(group: Group, now: datetime | None = None) -> list[str]:
    """What Slurm holds that the rows do not say, in words ([] when they agree); writes nothing."""
    now = now or timezone.now()
    accounts = SlurmAccounts(slurm_cli())
    shown = accounts.show([group.slurm_account]).get(group.slurm_account)
    if group.closed_at is not None:
        return [f"account {group.slurm_account} still exists for a closed group"] if shown else []
    spec, _allocations = wanted_account(accounts, group, now)
    found = spec.differences(shown)
    wanted, present = set(_active_members(group)), shown.users if shown else frozenset()
    account = group.slurm_account
    found += [f"{name} is a member but has no association in {account}" for name in sorted(wanted - present)]
    found += [f"{name} has an association in {account} but is no member" for name in sorted(present - wanted)]
    return found


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
    spec, allocations = wanted_account(accounts, group, now)
    for allocation in allocations:
        record_usage(accounts, group, allocation, now)
    changes = accounts.ensure(spec, organization=group.organization)
    wanted = _active_members(group)
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
