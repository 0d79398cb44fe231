"""Writing a group into Slurm. The task takes an id, re-reads the group and makes Slurm hold
what the rows say now (account, shares, limits, members), so a late, repeated or concurrent
run does the right thing; every outcome is recorded on the group's row."""

from __future__ import annotations

import logging
from datetime import UTC, date, datetime
from decimal import Decimal
from zoneinfo import ZoneInfo

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail
from django.db.models import Q
from django.utils import timezone

from cluster.clusters.services import slurm_cli
from cluster.clusters.sync import single_flight
from cluster.commands.accounts import SlurmAccounts
from cluster.errors import SlurmCommandError, SlurmError, SlurmTransientError
from groups.group_plans import group_pays
from groups.models import MANAGING_ROLES, Allocation, Group, Membership
from groups.slurm_terms import account_spec, allocated_minutes
from groups.usage import as_gpu_minutes
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
    """When Slurm last reset its usage (PriorityUsageResetPeriod=MONTHLY: midnight on the 1st
    in slurmctld's time zone, SLURM_USAGE_RESET_TIMEZONE)."""
    local = now.astimezone(ZoneInfo(settings.SLURM_USAGE_RESET_TIMEZONE))
    return local.replace(day=1, hour=0, minute=0, second=0, microsecond=0)


def _start_of(day: date) -> datetime:
    return datetime.combine(day, datetime.min.time(), tzinfo=ZoneInfo(settings.SLURM_USAGE_RESET_TIMEZONE))


def _earliest_starts(allocations: list[Allocation]) -> dict[str, datetime]:
    starts: dict[str, datetime] = {}
    for allocation in allocations:
        start = _start_of(allocation.starts_on)
        starts[allocation.gpu_type] = min(starts.get(allocation.gpu_type, start), start)
    return starts


def _gpu_minutes(held: dict, gpu_type: str) -> int:
    """GPU-minutes of a type from sacct's TRES-minutes, a shard counted as its share of a GPU."""
    total = Decimal(0)
    for tres, minutes in held.items():
        found = as_gpu_minutes(tres, minutes)
        if found is not None and found[0] == gpu_type:
            total += found[1]
    return int(total)


def used_before_reset(accounts: SlurmAccounts, group: Group, allocations: list[Allocation], now: datetime):
    """GPU-minutes by type the group used since its allocations of that type began, before
    this month's usage reset (shards counted as their share of a GPU); each type counted once,
    however many allocations of it are in force."""
    month_start = _month_start(now)
    used: dict[str, int] = {}
    for gpu_type, start in _earliest_starts(allocations).items():
        if start < month_start:
            used[gpu_type] = _gpu_minutes(accounts.allocated_minutes(group.slurm_account, start, month_start), gpu_type)
    return used


def record_usage(accounts: SlurmAccounts, group: Group, allocations: list[Allocation], now: datetime) -> None:
    """What the group has used of its allocations in force (running jobs up to now), on their
    rows: a type's usage since its earliest allocation began is spread over its allocations
    oldest first (never counted twice), the newest taking any excess. The group's managers are
    e-mailed once an allocation passes ALLOCATION_WARN_PERCENT."""
    for gpu_type, start in _earliest_starts(allocations).items():
        left = _gpu_minutes(accounts.allocated_minutes(group.slurm_account, start, now), gpu_type)
        of_type = sorted((a for a in allocations if a.gpu_type == gpu_type), key=lambda a: (a.starts_on, a.pk))
        for position, allocation in enumerate(of_type):
            last = position == len(of_type) - 1
            share = left if last else min(left, (allocation.approved_gpu_hours or 0) * 60)
            left -= share
            Allocation.objects.filter(pk=allocation.pk).update(used_gpu_minutes=share, usage_read_at=now)
            allocation.used_gpu_minutes = share
            _warn_if_nearly_used(group, allocation, now)


def _warn_if_nearly_used(group: Group, allocation: Allocation, now: datetime) -> None:
    percent = allocation.used_percent or 0
    if percent >= settings.ALLOCATION_WARN_PERCENT and Allocation.objects.filter(
        pk=allocation.pk, warned_at__isnull=True
    ).update(warned_at=now):
        managers = Membership.objects.active().filter(group=group, role__in=MANAGING_ROLES)
        addresses = [address for address in managers.values_list("user__email", flat=True) if address]
        send_mail(
            f"{group.name}: {percent} % of the {allocation.gpu_type} allocation used",
            f"{group.name} has used {allocation.used_gpu_minutes // 60} of its {allocation.approved_gpu_hours} "
            f"{allocation.gpu_type} GPU-hours ({allocation.starts_on} to {allocation.ends_on}). At "
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
    if group.closed_at is not None:
        return account_spec(group, settings.GPU_TYPES, {}), []
    allocations = allocations_in_force(group.pk, now.astimezone(UTC).date())
    before_reset = used_before_reset(accounts, group, allocations, now)
    minutes = allocated_minutes(allocations, before_reset, settings.ALLOCATION_HOLD_PERCENT)
    since_reset = accounts.allocated_minutes(group.slurm_account, _month_start(now), now)
    return account_spec(group, settings.GPU_TYPES, minutes, since_reset), allocations


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


def _removing(accounts: SlurmAccounts, group: Group, names, changes: list[str], failures: list[str]) -> None:
    """Take each of `names` out of the group's account; one refusal (a running job) does not
    stop the others, and is reported so the sync is tried again."""
    for name in sorted(names):
        try:
            accounts.remove_member(group.slurm_account, name)
            changes.append(f"{name} removed")
        except SlurmError as exc:
            failures.append(f"{name} not removed yet (new jobs held, pending ones cancelled): {exc}")


def write_group(group: Group, now: datetime | None = None) -> list[str]:
    """Make Slurm hold the group as its rows say; the changes made, in words. Raises
    SlurmCommandError naming every step Slurm refused, after doing all the others."""
    now = now or timezone.now()
    accounts = SlurmAccounts(slurm_cli())
    shown = accounts.show([group.slurm_account]).get(group.slurm_account)
    changes: list[str] = []
    failures: list[str] = []
    if group.closed_at is not None:
        if shown:
            # First nothing new runs (limits 0, submissions held), then the members go, then the account.
            spec, _allocations = wanted_account(accounts, group, now)
            changes += accounts.ensure(spec, organization=group.organization)
            _removing(accounts, group, shown.users, changes, failures)
            if not failures:
                accounts.delete(group.slurm_account)
                changes.append(f"account {group.slurm_account} removed")
    else:
        accounts.ensure_parent(group.parent_account, organization=group.organization)
        spec, allocations = wanted_account(accounts, group, now)
        record_usage(accounts, group, allocations, now)
        changes += accounts.ensure(spec, organization=group.organization)
        wanted = _active_members(group)
        present = shown.users if shown else frozenset()
        # Where the group holds no plan, its members pay for their group jobs under their own
        # plans: a capped plan's budget binds here too, or a Free member's group jobs ran past it.
        members_pay = not group_pays(group.pk)
        for name, membership in sorted(wanted.items()):
            terms = _member_terms(membership)
            try:
                # A paused plan holds the member's new jobs here too, not only in their own account.
                held = terms.max_submit_jobs == 0
                budget = terms.gpu_minutes if members_pay else None
                accounts.add_member(
                    group.slurm_account, name, terms.qos, terms.default_qos, held=held, gpu_minutes=budget
                )
            except SlurmError as exc:
                failures.append(f"{name} not added: {exc}")
                continue
            if name not in present:
                changes.append(f"{name} added")
        _removing(accounts, group, present - set(wanted), changes, failures)
    if failures:
        raise SlurmCommandError("; ".join(failures))
    return changes


@shared_task(bind=True, max_retries=8)
def sync_group(self, group_id: int) -> str:
    # One sync of a group at a time: two reading the members at different moments could
    # otherwise re-add someone the other removed. The one that waits runs after, reading anew.
    with single_flight(f"group-sync:{group_id}", timeout=300) as acquired:
        if not acquired:
            raise self.retry(countdown=5)
        group = Group.objects.filter(pk=group_id).first()
        if group is None:
            return "gone"
        read_version = group.slurm_version  # what this sync writes is at least this change
        try:
            changes = write_group(group)
        except Exception as exc:  # whatever failed is on the row, where the group's page shows it
            message = exc.public_message if isinstance(exc, SlurmError) else f"{type(exc).__name__}: {exc}"
            Group.objects.filter(pk=group_id).update(slurm_state=Group.SlurmState.ERROR, slurm_error=message[:2000])
            log.warning("group %s not written to Slurm: %s", group.slug, exc)
            if not isinstance(exc, SlurmError):
                raise
            if isinstance(exc, SlurmTransientError) or self.request.retries < 3:
                raise self.retry(exc=exc, countdown=_backoff(self.request.retries)) from exc
            return f"error: {exc}"
    mark_synced(group_id, read_version)
    return "; ".join(changes) or "unchanged"


def mark_synced(group_id: int, read_version: int | None = None) -> bool:
    """Slurm holds the group as its rows said when write_group read them: synced, unless a
    change came after `read_version` (its own sync, sent on its commit, marks it then)."""
    rows = Group.objects.filter(pk=group_id)
    if read_version is not None:
        rows = rows.filter(slurm_version=read_version)
    return bool(rows.update(slurm_state=Group.SlurmState.SYNCED, slurm_error="", synced_at=timezone.now()))


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
