"""Groups' writes: the only entry for views, the API, tasks and other apps.

Each is atomic and audited; what Slurm must learn (the account, its members, its limits) is
sent on commit to `tasks.sync_group`, which records on the group's row whether Slurm has it.
Refusals raise GroupError with the field at fault and an HTTP status, and write nothing.
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal, InvalidOperation

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.access import is_admin as _is_admin
from audit.log import record
from foundation.emails import verified_addresses
from groups.models import (
    MANAGING_ROLES,
    Allocation,
    Group,
    GroupBudget,
    GroupPlan,
    GroupRole,
    Invitation,
    Membership,
    hash_token,
)
from groups.queries import GroupError, membership, organizations, row_id, visible_group
from groups.tasks import sync_group
from groups.validators import validate_group_name
from plans.models import Plan


def slurm_must_learn(*group_ids: int) -> None:
    """These groups changed in what Slurm holds of them (account, members, shares, limits):
    pending until a sync after this change has written them, which is sent on commit."""
    Group.objects.filter(pk__in=group_ids).update(
        slurm_state=Group.SlurmState.PENDING, slurm_version=F("slurm_version") + 1
    )
    for group_id in group_ids:
        transaction.on_commit(lambda group_id=group_id: sync_group.delay(group_id))


def _sync_on_commit(group_id: int) -> None:
    slurm_must_learn(group_id)


def _managing(user, group_id: int) -> Membership | None:
    found = membership(user, group_id)
    return found if found and found.role in MANAGING_ROLES else None


def require_manager(user, group_id: int) -> Membership | None:
    visible_group(user, group_id)
    found = _managing(user, group_id)
    if found is None and not _is_admin(user):
        raise GroupError("group", "Only the group's PI and managers may do this.", 403)
    return found


def _open(group_id: int) -> None:
    if Group.objects.filter(pk=group_id, closed_at__isnull=False).exists():
        raise GroupError("group", "The group is closed.", 409)


def refuse_own_group(actor, group_id: int, what: str) -> None:
    """An admin does not decide for a group they are, or lately were, in (another admin does)."""
    recent = timezone.now() - timedelta(days=90)
    if (
        Membership.objects.filter(group_id=group_id, user=actor)
        .filter(Q(left_at__isnull=True) | Q(left_at__gte=recent))
        .exists()
    ):
        raise GroupError("group", f"You belong (or lately belonged) to this group: another admin {what}.", 403)


def _state(group: Group) -> dict:
    return {"name": group.name, "slug": group.slug, "organization": group.organization, "shares": group.shares}


def create_group(actor, *, name: str, slug: str, organization: str = "") -> Group:
    """A new group with `actor` as its PI. Verified users may create groups when
    GROUPS_SELF_SERVICE is on; admins always. A new group has no GPU time in Slurm until an
    admin approves an allocation (docs/groups.md)."""
    if not _is_admin(actor):
        if not settings.GROUPS_SELF_SERVICE:
            raise GroupError("group", "Groups are created by the pool's admins.", 403)
        if not verified_addresses(actor):
            raise GroupError("group", "Verify your e-mail address before creating a group.", 403)
        if Group.objects.filter(created_by=actor).count() >= settings.GROUPS_PER_USER:
            raise GroupError("group", f"You have created {settings.GROUPS_PER_USER} groups, the most one may.", 409)
        # Each organisation is an account under Slurm's root: new ones are the admins' to make.
        given = (organization or "").strip().lower()
        if given and given not in organizations():
            raise GroupError("organization", "A new organisation is made by the pool's admins; leave it empty.", 403)
    name = (name or "").strip() if isinstance(name, str) else name
    try:
        validate_group_name(name)
    except ValidationError as exc:
        raise GroupError("name", exc.messages[0]) from None
    group = Group(
        name=name,
        slug=(slug or "").strip().lower(),
        organization=(organization or settings.GROUP_DEFAULT_ORGANIZATION).strip().lower(),
        created_by=actor,
    )
    try:
        group.full_clean(exclude=["created_by"])
    except Exception as exc:  # ValidationError: the first message of the first field
        errors = getattr(exc, "message_dict", {"group": [str(exc)]})
        field_name, messages = next(iter(errors.items()))
        status = 409 if field_name == "slug" and "already exists" in messages[0] else 400
        raise GroupError(field_name, messages[0], status) from None
    try:
        with transaction.atomic():
            group.save()
            Membership.objects.create(group=group, user=actor, role=GroupRole.PI)
            record(actor, "group.create", f"group:{group.slug}", after=_state(group))
    except IntegrityError:
        raise GroupError("slug", "A group with this short name exists already.", 409) from None
    _sync_on_commit(group.pk)
    return group


def invite(group_id: int, actor, *, email: str, role: str = GroupRole.MEMBER) -> tuple[Invitation, str]:
    """Invite an address; e-mails the link (an address with no account signs up from it).
    A new invitation to an address replaces the open one. Returns (invitation, token)."""
    inviter = require_manager(actor, group_id)
    _open(group_id)
    email = (email or "").strip().lower()
    if "@" not in email or len(email) > 254:
        raise GroupError("email", "A valid e-mail address is required.")
    if role not in GroupRole.values or role == GroupRole.PI:
        raise GroupError("role", "Invite as a member or a manager; the PI hands the group over instead.")
    if role == GroupRole.MANAGER and inviter is not None and inviter.role != GroupRole.PI and not _is_admin(actor):
        raise GroupError("role", "Only the PI invites managers.", 403)
    User = get_user_model()
    if Membership.objects.active().filter(group_id=group_id, user__in=User.objects.filter(email__iexact=email)):
        raise GroupError("email", "That address belongs to a member already.", 409)
    token, token_hash = Invitation.new_token()
    with transaction.atomic():
        group = Group.objects.select_for_update().get(pk=group_id)
        now = timezone.now()
        Invitation.objects.filter(group=group, email=email, state=Invitation.State.OPEN).update(
            state=Invitation.State.REVOKED, decided_at=now
        )
        invitation = Invitation.objects.create(
            group=group,
            email=email,
            role=role,
            token_hash=token_hash,
            invited_by=actor,
            expires_at=now + timedelta(days=settings.GROUP_INVITATION_DAYS),
        )
        record(actor, "group.invite", f"group:{group.slug}", after={"email": email, "role": role})
    link = f"{settings.SITE_URL}/groups/invitations/{token}/"
    transaction.on_commit(
        lambda: send_mail(
            f"You are invited to {group.name} on the GPU pool",
            f"{actor.get_username()} invites you to the group {group.name} as {role}.\n\n"
            f"Accept (sign up first if you have no account, with this address): {link}\n\n"
            f"The link works until {invitation.expires_at:%Y-%m-%d}.",
            None,
            [email],
            fail_silently=True,  # the inviter sees the invitation and can send it again
        )
    )
    return invitation, token


def _end_open(model, pk: int, group_id: int, *, open_state: str, new_state: str, noun: str):
    """A conditional UPDATE from the open state: the row, or GroupError 404 (not this group's)
    or 409 (decided already), in which case nothing changed."""
    changed = model.objects.filter(pk=pk, group_id=group_id, state=open_state).update(
        state=new_state, decided_at=timezone.now()
    )
    found = model.objects.filter(pk=pk, group_id=group_id).select_related("group").first()
    if found is None:
        raise GroupError(noun, f"No such {noun}.", 404)
    if not changed:
        raise GroupError(noun, f"The {noun} is {found.state} already.", 409)
    return found


def revoke_invitation(group_id: int, invitation_id: int, actor) -> Invitation:
    require_manager(actor, group_id)
    with transaction.atomic():
        invitation = _end_open(
            Invitation, invitation_id, group_id,
            open_state=Invitation.State.OPEN, new_state=Invitation.State.REVOKED, noun="invitation",
        )  # fmt: skip
        record(actor, "group.invite_revoke", f"group:{invitation.group.slug}", after={"email": invitation.email})
    return invitation


def invitation_for(token: str) -> Invitation | None:
    return Invitation.objects.filter(token_hash=hash_token(token or "")).select_related("group").first()


def accept_invitation(token: str, user) -> Membership:
    """Join the group the token names. The user's verified address must be the invited one
    (a forwarded link does not make someone else a member)."""
    with transaction.atomic():
        found = invitation_for(token)
        if found is None:
            raise GroupError("invitation", "This invitation link is not valid.", 404)
        invitation = Invitation.objects.select_for_update().get(pk=found.pk)
        if invitation.state != Invitation.State.OPEN:
            raise GroupError("invitation", f"This invitation was {invitation.state}.", 409)
        if invitation.expires_at <= timezone.now():
            raise GroupError("invitation", "This invitation has expired; ask for a new one.", 409)
        if invitation.email not in verified_addresses(user):
            raise GroupError(
                "invitation", f"Sign in with {invitation.email}, verified, to accept this invitation.", 403
            )
        if invitation.group.closed_at:
            raise GroupError("invitation", "This group is closed.", 409)
        if membership(user, invitation.group_id):
            raise GroupError("invitation", "You are a member of this group already.", 409)
        joined = Membership.objects.create(group=invitation.group, user=user, role=invitation.role)
        Invitation.objects.filter(pk=invitation.pk).update(
            state=Invitation.State.ACCEPTED, accepted_by=user, decided_at=timezone.now()
        )
        record(user, "group.join", f"group:{invitation.group.slug}", after={"role": invitation.role})
    _sync_on_commit(invitation.group_id)
    return joined


def remove_member(group_id: int, actor, user_id: int) -> Membership:
    """A manager removes a member (the PI removes managers too); a member may leave. The PI
    hands the group over before leaving."""
    if row_id(group_id) is None or row_id(user_id) is None:
        raise GroupError("member", "No such member.", 404)
    with transaction.atomic():
        target = Membership.objects.active().select_for_update().filter(group_id=group_id, user_id=user_id).first()
        own = target is not None and target.user_id == actor.pk
        if not own:
            acting = require_manager(actor, group_id)
        if target is None:
            raise GroupError("member", "No such member.", 404)
        if target.role == GroupRole.PI:
            raise GroupError("member", "The PI hands the group over to another member before leaving.", 409)
        if not own and target.role == GroupRole.MANAGER and acting is not None and acting.role != GroupRole.PI:
            raise GroupError("member", "Only the PI removes a manager.", 403)
        reason = Membership.EndReason.LEFT if own else Membership.EndReason.REMOVED
        Membership.objects.filter(pk=target.pk, left_at__isnull=True).update(
            left_at=timezone.now(), end_reason=reason, is_default=False
        )
        target.refresh_from_db()
        action = "group.leave" if own else "group.remove_member"
        record(actor, action, f"group:{target.group.slug}", before={"user": user_id, "role": target.role})
    _sync_on_commit(group_id)
    return target


def change_role(group_id: int, actor, user_id: int, role: str) -> Membership:
    """The PI (or an admin) changes a member's role; naming a new PI hands the group over
    (the old PI stays as a manager)."""
    if role not in GroupRole.values:
        raise GroupError("role", f"One of {', '.join(GroupRole.values)}.")
    acting = require_manager(actor, group_id)
    if not _is_admin(actor) and (acting is None or acting.role != GroupRole.PI):
        raise GroupError("role", "Only the PI changes roles.", 403)
    with transaction.atomic():
        target = Membership.objects.active().select_for_update().filter(group_id=group_id, user_id=user_id).first()
        if target is None:
            raise GroupError("member", "No such member.", 404)
        if target.role == GroupRole.PI and role != GroupRole.PI:
            raise GroupError("role", "Name another member PI to hand the group over.", 409)
        before = target.role
        if role == GroupRole.PI:
            Membership.objects.active().filter(group_id=group_id, role=GroupRole.PI).update(role=GroupRole.MANAGER)
        Membership.objects.filter(pk=target.pk).update(role=role)
        target.refresh_from_db()
        record(actor, "group.role", f"group:{target.group.slug}", before={"user": user_id, "role": before},
               after={"user": user_id, "role": role})  # fmt: skip
    return target


def set_shares(group_id: int, actor, shares: int, reason: str = "") -> Group:
    """Admins set a group's shares of the pool (Slurm's Fairshare)."""
    if not _is_admin(actor):
        raise GroupError("shares", "Only the pool's admins set a group's shares.", 403)
    refuse_own_group(actor, group_id, "sets its shares")
    _open(group_id)
    if isinstance(shares, bool) or not isinstance(shares, int) or not 1 <= shares <= 1_000_000:
        raise GroupError("shares", "A whole number from 1 to 1,000,000.")
    with transaction.atomic():
        group = Group.objects.select_for_update().get(pk=group_id)
        before = _state(group)
        Group.objects.filter(pk=group_id).update(shares=shares)
        group.refresh_from_db()
        record(actor, "group.shares", f"group:{group.slug}", before=before, after=_state(group), reason=reason)
    _sync_on_commit(group_id)
    return group


MAX_ALLOCATION_DAYS = 366


def request_allocation(
    group_id: int,
    actor,
    *,
    gpu_type: str,
    gpu_hours,
    starts_on,
    ends_on,
    justification: str,
    renews_id: int | None = None,
) -> Allocation:
    """The PI or a manager asks for GPU-hours of a type for a period; admins decide."""
    require_manager(actor, group_id)
    _open(group_id)
    if gpu_type not in settings.GPU_TYPES:
        raise GroupError("gpu_type", f"One of {', '.join(sorted(settings.GPU_TYPES))}.")
    if isinstance(gpu_hours, bool) or not isinstance(gpu_hours, int) or not 1 <= gpu_hours <= 1_000_000:
        raise GroupError("gpu_hours", "A whole number of GPU-hours from 1 to 1,000,000.")
    if not isinstance(starts_on, date) or not isinstance(ends_on, date):
        raise GroupError("starts_on", "Dates as YYYY-MM-DD.")
    if ends_on <= starts_on:
        raise GroupError("ends_on", "The period ends after it starts.")
    if (ends_on - starts_on).days > MAX_ALLOCATION_DAYS:
        raise GroupError("ends_on", f"A period is at most {MAX_ALLOCATION_DAYS} days; ask again to renew.")
    if ends_on <= timezone.now().date():
        raise GroupError("ends_on", "The period has ended already.")
    justification = (justification or "").strip()
    if not 10 <= len(justification) <= 4000:
        raise GroupError("justification", "Say what the time is for, in 10-4000 characters.")
    if renews_id is not None and not Allocation.objects.filter(pk=renews_id, group_id=group_id).exists():
        raise GroupError("renews", "No such allocation of this group.", 404)
    with transaction.atomic():
        allocation = Allocation.objects.create(
            group_id=group_id,
            gpu_type=gpu_type,
            gpu_hours=gpu_hours,
            starts_on=starts_on,
            ends_on=ends_on,
            justification=justification,
            requested_by=actor,
            renews_id=renews_id,
        )
        record(actor, "group.allocation_request", f"group:{allocation.group.slug}", after=_allocation_state(allocation))
    return allocation


def _allocation_state(allocation: Allocation) -> dict:
    return {
        "allocation": allocation.pk,
        "gpu_type": allocation.gpu_type,
        "gpu_hours": allocation.gpu_hours,
        "approved_gpu_hours": allocation.approved_gpu_hours,
        "period": f"{allocation.starts_on}..{allocation.ends_on}",
        "state": allocation.state,
    }


def decide_allocation(allocation_id: int, actor, *, approve: bool, gpu_hours=None, note: str = "") -> Allocation:
    """An admin approves (possibly fewer or more hours than asked) or refuses a request.
    An admin who belongs to the group does not decide its requests (another admin does)."""
    if not _is_admin(actor):
        raise GroupError("allocation", "Only the pool's admins decide allocations.", 403)
    note = (note or "").strip()[:500]
    with transaction.atomic():
        allocation = Allocation.objects.select_for_update().select_related("group").filter(pk=allocation_id).first()
        if allocation is None:
            raise GroupError("allocation", "No such allocation.", 404)
        refuse_own_group(actor, allocation.group_id, "decides its allocations")
        _open(allocation.group_id)
        if allocation.state != Allocation.State.REQUESTED:
            raise GroupError("allocation", f"The request was {allocation.state} already.", 409)
        hours = allocation.gpu_hours if gpu_hours in (None, "") else gpu_hours
        if approve and (isinstance(hours, bool) or not isinstance(hours, int) or not 1 <= hours <= 1_000_000):
            raise GroupError("gpu_hours", "A whole number of GPU-hours from 1 to 1,000,000.")
        if not approve and not note:
            raise GroupError("note", "Say why the request is refused; the group reads it.")
        before = _allocation_state(allocation)
        Allocation.objects.filter(pk=allocation.pk, state=Allocation.State.REQUESTED).update(
            state=Allocation.State.APPROVED if approve else Allocation.State.REFUSED,
            approved_gpu_hours=hours if approve else None,
            decided_by=actor,
            decided_at=timezone.now(),
            decision_note=note,
        )
        allocation.refresh_from_db()
        action = "group.allocation_approve" if approve else "group.allocation_refuse"
        record(actor, action, f"group:{allocation.group.slug}", before=before, after=_allocation_state(allocation),
               reason=note)  # fmt: skip
    if approve:
        _sync_on_commit(allocation.group_id)
    return allocation


def withdraw_allocation(group_id: int, allocation_id: int, actor) -> Allocation:
    require_manager(actor, group_id)
    with transaction.atomic():
        allocation = _end_open(
            Allocation, allocation_id, group_id,
            open_state=Allocation.State.REQUESTED, new_state=Allocation.State.WITHDRAWN, noun="allocation",
        )  # fmt: skip
        target = f"group:{allocation.group.slug}"
        record(actor, "group.allocation_withdraw", target, after=_allocation_state(allocation))
    return allocation


def set_default_group(user, group_id: int | None) -> None:
    """Charge the user's jobs to this group when they name none (None: to themselves)."""
    with transaction.atomic():
        # The user's memberships locked: two changes at once leave one default, not an error.
        mine = list(Membership.objects.active().select_for_update().filter(user=user))
        if group_id is not None and not any(found.group_id == group_id for found in mine):
            raise GroupError("group", "No such group.", 404)
        Membership.objects.active().filter(user=user, is_default=True).update(is_default=False)
        if group_id is not None:
            Membership.objects.active().filter(user=user, group_id=group_id).update(is_default=True)
        record(user, "group.default", f"user:{user.pk}", after={"group": group_id})


def apply_claimed_groups(user, claim_values: list[str]) -> tuple[list[str], list[str]]:
    """At each sign-in through the institution: the user is a member of the open groups an
    admin tied to a value its groups claim names (Group.claim_value), and no longer of those
    the claim made them a member of and stopped naming. Memberships from invitations are left
    alone, and a person who left a group or was removed from it is not put back. (joined, left)."""
    values = [value for value in claim_values if value]
    tied = Group.objects.filter(claim_value__in=values, closed_at__isnull=True).exclude(claim_value="")
    wanted = {group.pk: group for group in tied}
    # A member's own leaving, or a manager's removal, stands: the claim does not undo it.
    decided = set(
        Membership.objects.filter(
            user=user, group_id__in=wanted, end_reason__in=[Membership.EndReason.LEFT, Membership.EndReason.REMOVED]
        ).values_list("group_id", flat=True)
    )
    joined, left, changed = [], [], set()
    with transaction.atomic():
        current = {m.group_id: m for m in Membership.objects.active().select_for_update().filter(user=user)}
        for group_id, group in wanted.items():
            if group_id not in current and group_id not in decided:
                Membership.objects.create(group=group, user=user, role=GroupRole.MEMBER, via_claim=True)
                joined.append(group.slug)
                changed.add(group_id)
                record(user, "group.join", f"group:{group.slug}", after={"role": GroupRole.MEMBER, "via": "claim"})
        for group_id, found in current.items():
            if found.via_claim and group_id not in wanted and found.role != GroupRole.PI:
                Membership.objects.filter(pk=found.pk, left_at__isnull=True).update(
                    left_at=timezone.now(), end_reason=Membership.EndReason.CLAIM, is_default=False
                )
                left.append(found.group.slug)
                changed.add(group_id)
                record(user, "group.leave", f"group:{found.group.slug}", before={"role": found.role, "via": "claim"})
    for group_id in sorted(changed):
        _sync_on_commit(group_id)
    return joined, left


def close_group(group_id: int, actor, reason: str = "") -> Group:
    """The PI (or an admin) closes a group: its account leaves Slurm (once its jobs have
    ended: Slurm refuses to delete an account with running jobs, and the sync retries), its
    memberships end, its rows stay for the bills."""
    acting = require_manager(actor, group_id)
    if not _is_admin(actor) and (acting is None or acting.role != GroupRole.PI):
        raise GroupError("group", "Only the PI closes the group.", 403)
    with transaction.atomic():
        now = timezone.now()
        if not Group.objects.filter(pk=group_id, closed_at__isnull=True).update(closed_at=now):
            raise GroupError("group", "The group is closed already.", 409)
        Membership.objects.active().filter(group_id=group_id).update(
            left_at=now, is_default=False, end_reason=Membership.EndReason.CLOSED
        )
        Invitation.objects.filter(group_id=group_id, state=Invitation.State.OPEN).update(
            state=Invitation.State.REVOKED, decided_at=now
        )
        # A closed group pays no more fees: its plan ends with it (its invoices stay).
        GroupPlan.objects.filter(group_id=group_id, ended_at__isnull=True).update(ended_at=now)
        group = Group.objects.get(pk=group_id)
        record(actor, "group.close", f"group:{group.slug}", before=_state(group), reason=reason)
    _sync_on_commit(group_id)
    return group


def set_group_plan(group_id: int, actor, plan_code: str | None, reason: str = "") -> GroupPlan | None:
    """Admins give a group a plan to pay its group jobs under (or take it away: `plan_code`
    None or ""), from now on. The current row ends and a new one starts, so runs keep the plan
    held at their start (groups/group_plans.py). A plan whose included hours are a cap (Free)
    is refused: Slurm enforces that cap per user, so under a group it would bill nothing for
    unlimited hours. Setting the plan the group holds already changes nothing."""
    if not _is_admin(actor):
        raise GroupError("plan", "A group's plan is set by the pool's admins.", 403)
    refuse_own_group(actor, group_id, "sets its plan")
    _open(group_id)
    plan = None
    if plan_code:
        plan = Plan.objects.filter(code=str(plan_code)).first()
        if plan is None:
            raise GroupError("plan", f"No plan is called {str(plan_code)[:40]!r}.")
        if plan.included_hours_are_a_cap:
            raise GroupError(
                "plan", f"A group pays under a plan that bills; {plan.name}'s included hours are a per-user cap."
            )
    with transaction.atomic():
        group = Group.objects.select_for_update().get(pk=group_id)
        held = GroupPlan.objects.select_for_update().filter(group=group, ended_at__isnull=True).first()
        if (held.plan_id if held else None) == (plan.pk if plan else None):
            return held
        now = timezone.now()
        if held is not None:
            GroupPlan.objects.filter(pk=held.pk, ended_at__isnull=True).update(ended_at=now)
        new = GroupPlan.objects.create(group=group, plan=plan, started_at=now, set_by=actor) if plan else None
        record(
            actor,
            "group.plan",
            f"group:{group.slug}",
            before={"plan": held.plan.code if held else None},
            after={"plan": plan.code if plan else None},
            reason=reason,
        )
    return new


MAX_BUDGET = 10_000_000


def save_group_budget(group_id: int, actor, *, monthly_amount, hold_at_limit: bool) -> GroupBudget:
    """The PI or a manager sets the group's monthly budget (billing/group_money.py). A new
    amount starts the month's warnings afresh."""
    require_manager(actor, group_id)
    _open(group_id)
    try:
        amount = Decimal(str(monthly_amount)).quantize(Decimal("0.01"))
    except (InvalidOperation, ValueError):
        raise GroupError("monthly_amount", "An amount in dollars, such as 500 or 1250.50.") from None
    if not amount.is_finite() or not Decimal(1) <= amount <= MAX_BUDGET:
        raise GroupError("monthly_amount", f"From $1 to ${MAX_BUDGET:,}.")
    with transaction.atomic():
        group = Group.objects.select_for_update().get(pk=group_id)
        budget = GroupBudget.objects.filter(group=group).first() or GroupBudget(group=group)
        before = {"monthly_amount": str(budget.monthly_amount), "hold": budget.hold_at_limit} if budget.pk else None
        if budget.monthly_amount != amount:
            budget.warned_80_for = budget.warned_100_for = None
        budget.monthly_amount = amount
        budget.hold_at_limit = bool(hold_at_limit)
        budget.save()
        record(
            actor,
            "group.budget",
            f"group:{group.slug}",
            before=before,
            after={"monthly_amount": str(amount), "hold": budget.hold_at_limit},
        )
    return budget


def clear_group_budget(group_id: int, actor) -> bool:
    require_manager(actor, group_id)
    with transaction.atomic():
        deleted, _ = GroupBudget.objects.filter(group_id=group_id).delete()
        if deleted:
            record(actor, "group.budget.clear", f"group:{Group.objects.get(pk=group_id).slug}")
    return bool(deleted)
