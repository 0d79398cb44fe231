"""Reading groups as a given user may: every group object a user can reach goes through
these, so a non-member gets the same 404 as for a group that does not exist."""

from __future__ import annotations

from django.conf import settings
from django.db.models import QuerySet

from accounts.access import is_admin
from cluster.errors import SlurmTransientError
from groups.models import Allocation, Group, Membership


class GroupError(Exception):
    """A refusal: the field at fault, words for the user, and the HTTP status it means."""

    def __init__(self, field_name: str, message: str, status: int = 400):
        super().__init__(f"{field_name}: {message}")
        self.field = field_name
        self.message = message
        self.status = status


def owned_by(user_id: int | None = None, group_id: int | None = None, *, through: str = "") -> dict:
    """Filter arguments for a row that belongs to a user or to a group (an invoice, a credits
    account): the group when `group_id` is given, else the user; `through` names the relation
    to follow first ("invoice" gives invoice__group_id...)."""
    if group_id is not None:
        found = {"group_id": group_id, "user_id": None}
    elif user_id is not None:
        found = {"user_id": user_id, "group_id": None}
    else:
        raise ValueError("it belongs to a user or a group: neither was given")
    return {f"{through}__{name}" if through else name: value for name, value in found.items()}


def membership(user, group_id) -> Membership | None:
    """The user's active membership of the group, or None."""
    if not getattr(user, "is_authenticated", False):
        return None
    return Membership.objects.active().filter(group_id=group_id, user=user).select_related("group").first()


def row_id(value) -> int | None:
    """`value` as a primary key the database can hold (1 .. 2**63 - 1), else None: an id past
    that is no row's (and SQLite raises OverflowError, PostgreSQL DataError, on the lookup)."""
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number < 2**63 else None


def organizations() -> list[str]:
    """The organisations a group may stand under without an admin: the pool's default first,
    then those groups stand under already (a new one is an admin's to name)."""
    default = settings.GROUP_DEFAULT_ORGANIZATION
    taken = set(Group.objects.order_by().values_list("organization", flat=True).distinct())
    return [default, *sorted(taken - {default})]


def visible_group(user, group_id) -> Group:
    """The group if the user is a member (or an admin); GroupError 404 otherwise."""
    number = row_id(group_id)
    group = Group.objects.filter(pk=number).first() if number is not None else None
    if group is None or not (is_admin(user) or membership(user, group.pk)):
        raise GroupError("group", "No such group.", 404)
    return group


def groups_of(user) -> QuerySet[Group]:
    """The open groups the user is an active member of."""
    return Group.objects.filter(
        memberships__user=user, memberships__left_at__isnull=True, closed_at__isnull=True
    ).distinct()


def group_to_charge(user, group_id, *, lock: bool = True) -> Group:
    """The group a job of `user` is charged to: one they belong to, open, whose account Slurm
    has. GroupError (field "group") says what is wrong otherwise. `lock=False` for a check that
    records nothing (a quote), outside any transaction."""
    if isinstance(group_id, bool) or not str(group_id).isdigit():
        raise GroupError("group", "A group's id (a whole number) is required.", 400)
    memberships = Membership.objects.active()
    if lock:
        # Locked until the caller's transaction ends: a removal committing meanwhile waits, so a
        # job is never recorded for a group its owner has just left.
        memberships = memberships.select_for_update(of=("self",))
    found = memberships.filter(group_id=int(group_id), user=user).select_related("group").first()
    if found is None:
        raise GroupError("group", "You are not a member of that group.", 400)
    group = found.group
    if group.closed_at is not None:
        raise GroupError("group", "That group is closed.", 400)
    if group.synced_at is None:
        raise GroupError("group", "The group's Slurm account is not ready yet; try again in a minute.", 400)
    return group


def default_group(user) -> Group | None:
    """The group the user's jobs are charged to when they name none (None: themselves); not
    checked for charging: jobs use group_to_charge on its id."""
    found = (
        Membership.objects.active()
        .filter(user=user, is_default=True, group__closed_at__isnull=True)
        .select_related("group")
        .first()
    )
    return found.group if found else None


def gpu_minutes_left(group: Group, gpu_type: str, day) -> int:
    """What the group's approved allocations of `gpu_type` in force on `day` still allow,
    in GPU-minutes, as of the last usage read (Slurm, which holds the exact figure, has the
    last word: this is for a clear refusal before submitting)."""
    allocations = Allocation.objects.filter(
        group=group, gpu_type=gpu_type, state=Allocation.State.APPROVED, starts_on__lte=day, ends_on__gt=day
    )
    left = 0
    for allocation in allocations:
        allowed = (allocation.approved_gpu_hours or 0) * 60 * settings.ALLOCATION_HOLD_PERCENT // 100
        left += max(0, allowed - allocation.used_gpu_minutes)
    return left


def sees_everyone(user, group: Group) -> bool:
    """Whether `user` sees every member's usage and jobs in `group` (its PI and managers, and
    admins), or only their own."""
    found = membership(user, group.pk)
    return is_admin(user) or bool(found and found.may_manage)


def group_ids_for_accounts(accounts: set[str]) -> dict[str, int]:
    """Slurm account -> the portal group it is (a job from outside the portal names its group
    by `--account`)."""
    prefix = settings.GROUP_ACCOUNT_PREFIX
    slugs = {account[len(prefix) :]: account for account in accounts if account.startswith(prefix)}
    if not slugs:
        return {}
    return {slugs[slug]: pk for slug, pk in Group.objects.filter(slug__in=slugs).values_list("slug", "pk")}


class GroupNotInSlurmYet(SlurmTransientError):
    """A group job waits: Slurm does not hold the group's newest change yet (a just-approved
    allocation, a new member), and would refuse the job ("violates accounting/QOS policy")."""


def require_in_slurm(group_id: int) -> None:
    """Raises GroupNotInSlurmYet unless the group's newest change is written to Slurm: a job's
    submission is then retried (jobs/tasks.py), as while Slurm does not answer."""
    found = Group.objects.filter(pk=group_id).values_list("name", "slurm_state").first()
    if found is None or found[1] == Group.SlurmState.SYNCED:
        return
    name, state = found
    raise GroupNotInSlurmYet(
        f"group {group_id} is {state} in Slurm",
        public_message=(
            f"The latest change to {name} (its allocation, members or shares) is still being written to "
            "Slurm; the job goes there as soon as it is."
        ),
    )
