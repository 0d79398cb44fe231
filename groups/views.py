"""The groups pages: one's groups, a group (members, invitations, allocations, usage), an
invitation's link, and the admins' queue of allocation requests. Every write goes through
groups.actions; every group through groups.queries (a non-member gets a 404)."""

from __future__ import annotations

from datetime import date

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import is_admin, role_required
from accounts.models import Role
from cluster.errors import SlurmError
from foundation.emails import verified_addresses
from groups import actions, charts, usage
from groups.forms import GroupCreateForm
from groups.models import Allocation, GroupRole, Invitation, Membership
from groups.queries import GroupError, membership, visible_group
from groups.validators import NAME_MAX_LENGTH


def _group_or_404(user, pk: int):
    try:
        return visible_group(user, pk)
    except GroupError as exc:
        raise Http404(exc.message) from None


def _said(request, exc: GroupError, what: str) -> None:
    messages.error(request, f"{what}: {exc.message}")


@login_required
def group_list(request):
    form = GroupCreateForm(request.user, request.POST if request.method == "POST" else None)
    if request.method == "POST" and form.is_valid():
        try:
            group = actions.create_group(
                request.user,
                name=form.cleaned_data["name"],
                slug=form.cleaned_data["slug"],
                organization=form.cleaned_data.get("organization", ""),
            )
        except GroupError as exc:
            form.refused(exc)
        else:
            messages.success(request, f"{group.name} created; its Slurm account is being set up.")
            return redirect("groups:detail", pk=group.pk)
    mine = Membership.objects.active().filter(user=request.user).select_related("group").order_by("group__name")
    context = {
        "memberships": mine,
        "may_create": settings.GROUPS_SELF_SERVICE or is_admin(request.user),
        "default_organization": settings.GROUP_DEFAULT_ORGANIZATION,
        "form": form,
        "name_max_length": NAME_MAX_LENGTH,
    }
    return render(request, "groups/list.html", context, status=400 if form.errors else 200)


def _usage(group, user):
    """This month's GPU-hours by member and type as `user` may see them; (rows, error)."""
    try:
        return usage.month_usage_seen_by(user, group, timezone.now())[1], ""
    except SlurmError as exc:
        return [], f"Slurm's accounting did not answer ({exc.public_message}); the figures come back when it does."


@login_required
def group_detail(request, pk: int):
    group = _group_or_404(request.user, pk)
    mine = membership(request.user, group.pk)
    manages = bool(mine and mine.may_manage) or is_admin(request.user)
    rows, usage_error = _usage(group, request.user)
    allocations = list(group.allocations.select_related("requested_by", "decided_by"))
    context = {
        "group": group,
        "mine": mine,
        "manages": manages,
        "is_pi": bool(mine and mine.role == GroupRole.PI),
        "is_admin": is_admin(request.user),
        "members": Membership.objects.active().filter(group=group).select_related("user__profile"),
        "invitations": group.invitations.filter(state=Invitation.State.OPEN) if manages else [],
        "allocations": allocations,
        "usage_rows": rows,
        "usage_error": usage_error,
        "usage_chart": charts.usage_chart(rows) if rows else None,
        "gpu_types": sorted(settings.GPU_TYPES),
        "today": date.today(),
        "roles": [GroupRole.MEMBER, GroupRole.MANAGER],
    }
    return render(request, "groups/detail.html", context)


def _back(pk: int):
    return redirect("groups:detail", pk=pk)


@login_required
@require_POST
def invite(request, pk: int):
    _group_or_404(request.user, pk)
    try:
        invitation, _token = actions.invite(
            pk, request.user, email=request.POST.get("email", ""), role=request.POST.get("role", GroupRole.MEMBER)
        )
    except GroupError as exc:
        _said(request, exc, "Not invited")
    else:
        messages.success(request, f"Invitation sent to {invitation.email}.")
    return _back(pk)


@login_required
@require_POST
def revoke(request, pk: int, invitation_id: int):
    _group_or_404(request.user, pk)
    try:
        actions.revoke_invitation(pk, invitation_id, request.user)
    except GroupError as exc:
        _said(request, exc, "Not revoked")
    return _back(pk)


@login_required
@require_POST
def remove(request, pk: int, user_id: int):
    _group_or_404(request.user, pk)
    try:
        actions.remove_member(pk, request.user, user_id)
    except GroupError as exc:
        _said(request, exc, "Not removed")
        return _back(pk)
    if user_id == request.user.pk:
        messages.success(request, "You left the group.")
        return redirect("groups:list")
    return _back(pk)


@login_required
@require_POST
def change_role(request, pk: int, user_id: int):
    _group_or_404(request.user, pk)
    try:
        actions.change_role(pk, request.user, user_id, request.POST.get("role", ""))
    except GroupError as exc:
        _said(request, exc, "Role not changed")
    return _back(pk)


@login_required
@require_POST
def make_default(request, pk: int):
    _group_or_404(request.user, pk)
    chosen = request.POST.get("default") == "1"
    try:
        actions.set_default_group(request.user, pk if chosen else None)
    except GroupError as exc:
        _said(request, exc, "Not changed")
    else:
        messages.success(request, "New jobs are charged to this group." if chosen else "New jobs are charged to you.")
    return _back(pk)


def _date(text: str):
    try:
        return date.fromisoformat(text)
    except (TypeError, ValueError):
        return None


@login_required
@require_POST
def set_shares(request, pk: int):
    _group_or_404(request.user, pk)
    shares = request.POST.get("shares", "")
    try:
        actions.set_shares(
            pk, request.user, int(shares) if shares.isdigit() else shares, request.POST.get("reason", "")
        )
    except GroupError as exc:
        _said(request, exc, "Shares not changed")
    return _back(pk)


@login_required
@require_POST
def close(request, pk: int):
    _group_or_404(request.user, pk)
    try:
        group = actions.close_group(pk, request.user, request.POST.get("reason", ""))
    except GroupError as exc:
        _said(request, exc, "Not closed")
        return _back(pk)
    messages.success(request, f"{group.name} is closed; its Slurm account goes once its jobs have ended.")
    return redirect("groups:list")


@login_required
@require_POST
def request_allocation(request, pk: int):
    _group_or_404(request.user, pk)
    hours = request.POST.get("gpu_hours", "")
    try:
        actions.request_allocation(
            pk,
            request.user,
            gpu_type=request.POST.get("gpu_type", ""),
            gpu_hours=int(hours) if hours.isdigit() else hours,
            starts_on=_date(request.POST.get("starts_on")),
            ends_on=_date(request.POST.get("ends_on")),
            justification=request.POST.get("justification", ""),
        )
    except GroupError as exc:
        _said(request, exc, "Not requested")
    else:
        messages.success(request, "Requested: an admin decides, and the group's page shows the answer.")
    return _back(pk)


def invitation(request, token: str):
    """The link in the e-mail. Signed out: sign up or sign in first (back here after)."""
    found = actions.invitation_for(token)
    if found is None:
        raise Http404("This invitation link is not valid.")
    if not request.user.is_authenticated:
        here = reverse("groups:invitation", args=[token])
        return render(request, "groups/invitation.html", {"invitation": found, "next": here, "signed_out": True})
    if request.method == "POST":
        try:
            joined = actions.accept_invitation(token, request.user)
        except GroupError as exc:
            _said(request, exc, "Not joined")
        else:
            messages.success(request, f"You joined {joined.group.name}.")
            return redirect("groups:detail", pk=joined.group_id)
    # Joining takes the invited address, verified: the page says so before the press.
    verified = found.email in verified_addresses(request.user)
    return render(request, "groups/invitation.html", {"invitation": found, "verified": verified})


@role_required(Role.ADMIN)
def allocation_queue(request):
    """Admins: the allocation requests waiting for a decision (403 to anyone else)."""
    if request.method == "POST":
        hours = request.POST.get("gpu_hours", "")
        try:
            decided = actions.decide_allocation(
                int(request.POST.get("allocation", "0") or 0),
                request.user,
                approve=request.POST.get("decision") == "approve",
                gpu_hours=int(hours) if hours.isdigit() else (hours or None),
                note=request.POST.get("note", ""),
            )
        except GroupError as exc:
            _said(request, exc, "Not decided")
        else:
            messages.success(request, f"{decided.group.name}: {decided.gpu_type} allocation {decided.state}.")
        return redirect("groups:allocation_queue")
    waiting = Allocation.objects.filter(state=Allocation.State.REQUESTED).select_related("group", "requested_by")
    return render(request, "groups/allocation_queue.html", {"waiting": waiting})
