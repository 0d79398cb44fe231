"""The group's money page (/billing/groups/<id>/): the plan it pays under, its credit pool,
its budget, each member's cost this month as a chart and a table, and its invoices. What each
person sees is what the API gives them (billing/api/group_money.py): a member their own share;
the PI and managers everything and the budget form; admins outside the group the plan and
pool forms. A non-member gets a 404. Writes go through groups.actions and credits.actions."""

from __future__ import annotations

import secrets
from datetime import timedelta
from decimal import Decimal

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import is_admin
from billing import group_money
from billing.digests import digest_of, ended_in_week
from billing.invoices.drafts import month_of
from billing.models import Invoice
from billing.pricing import to_cents
from credits import actions as credit_actions
from credits.actions import ledger
from groups import actions as group_actions
from groups.queries import GroupError, membership, visible_group
from plans.models import Plan
from telemetry.efficiency import summary


def _group(request, pk: int):
    try:
        return visible_group(request.user, pk)
    except GroupError:
        raise Http404("No such group.") from None


def cost_chart(shares: list[dict]) -> dict:
    """Cost by member, one stacked trace per GPU type (static/js/group_usage.js draws it)."""
    members = sorted({row["user__username"] for row in shares})
    types = sorted({row["gpu_type"] for row in shares})
    cost = {(row["user__username"], row["gpu_type"]): to_cents(row["amount"] or Decimal(0)) for row in shares}
    return {
        "unit": "USD",
        "members": members,
        "traces": [
            {"name": gpu_type or "no GPU", "values": [str(cost.get((m, gpu_type), "0.00")) for m in members]}
            for gpu_type in types
        ],
    }


@login_required
def group_money_page(request, pk: int):
    group = _group(request, pk)
    seen = group_money.money_seen_by(request.user, group, month_of(timezone.now()))
    mine = membership(request.user, group.pk)
    admin_outside = is_admin(request.user) and mine is None
    context = {
        "group": group,
        "month": seen.month,
        "everyone": seen.everyone,
        "manages": bool(mine and mine.may_manage),
        "admin_outside": admin_outside,
        "held": seen.held,
        "plans": Plan.objects.filter(included_hours_are_a_cap=False).order_by("priority", "code")
        if admin_outside
        else [],
        "budget": seen.budget,
        "spent": seen.spent,
        "fee": seen.fee,
        "invoiced_so_far": seen.invoiced_so_far,
        "pool": seen.pool,
        "shares": seen.shares,
        "shown_total": seen.shown_total,
        "chart": cost_chart(seen.shares) if seen.shares else None,
        "invoices": Invoice.objects.filter(group=group).order_by("-period", "-id")[:24] if seen.everyone else [],
        "pool_key": secrets.token_hex(12),
    }
    if seen.everyone:
        # The PI's weekly digest's figures (billing/digests.py), and the last 30 days by member.
        now = timezone.now()
        context["week"] = digest_of(ended_in_week(now).filter(group=group))
        context["by_member"] = summary("user", now - timedelta(days=30), now, group_id=group.pk)
    return render(request, "billing/group_money.html", context)


def _done(request, pk: int, call, success: str):
    try:
        call()
    except GroupError as exc:
        messages.error(request, exc.message)
    except ledger.LedgerError as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, success)
    return redirect("billing:group_money", pk=pk)


@login_required
@require_POST
def group_budget(request, pk: int):
    _group(request, pk)
    if request.POST.get("clear"):
        return _done(request, pk, lambda: group_actions.clear_group_budget(pk, request.user), "Budget cleared.")
    return _done(
        request,
        pk,
        lambda: group_actions.save_group_budget(
            pk,
            request.user,
            monthly_amount=request.POST.get("monthly_amount", ""),
            hold_at_limit=request.POST.get("hold_at_limit") == "on",
        ),
        "Budget saved.",
    )


@login_required
@require_POST
def group_plan(request, pk: int):
    _group(request, pk)
    plan = request.POST.get("plan") or None
    return _done(
        request,
        pk,
        lambda: group_actions.set_group_plan(pk, request.user, plan, request.POST.get("reason", "")),
        "The group now pays under that plan." if plan else "The members pay for their group jobs again.",
    )


@login_required
@require_POST
def group_credits(request, pk: int):
    group = _group(request, pk)

    def add():
        group_money.require_pool_admin(request.user, group.pk)
        amount = request.POST.get("amount", "")
        key = request.POST.get("key", "")
        if not amount.isdigit() or not 1 <= int(amount) <= 10**12:
            raise GroupError("amount", "A whole number of credits, 1 or more.")
        if not (8 <= len(key) <= 64 and key.isalnum()):
            raise GroupError("key", "The form is out of date: open it again.")
        credit_actions.adjust(
            None,
            int(amount),
            actor=request.user,
            reason=request.POST.get("reason", "")[:500],
            key=group_money.pool_key(group.pk, key),
            group_id=group.pk,
        )

    return _done(request, pk, add, "Credits added to the group's pool.")
