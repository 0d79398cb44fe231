"""/api/v1/groups/{id}/money, .../budget, .../plan, .../credits: a group's money.

Who sees what (billing.invoice_access, groups.queries): a non-member gets 404 as for a group
that does not exist; a member sees the group's plan and budget and their own share of the
month; the PI and managers see every member's share, the group's total and its credit pool,
and set the budget; admins (outside the group) set the plan and add credits to the pool.
Amounts are decimal strings in USD: shares exact, totals rounded half-up to the cent."""

from __future__ import annotations

from datetime import date
from decimal import Decimal

from django.utils import timezone
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from billing import group_money
from billing.invoices.drafts import month_of
from credits import actions as credit_actions
from credits.actions import ledger
from foundation.api.errors import StrictBooleanField
from foundation.money import format_amount
from groups import actions as group_actions
from groups.api.views import GroupAPIView, errors
from groups.queries import GroupError, visible_group

TAGS = ["groups"]


class ShareSerializer(serializers.Serializer):
    member = serializers.CharField(source="user__username")
    gpu_type = serializers.CharField()
    runs = serializers.IntegerField()
    gpu_seconds = serializers.IntegerField()
    amount = serializers.CharField(help_text="USD, exact decimal string")


class BudgetSerializer(serializers.Serializer):
    monthly_amount = serializers.DecimalField(max_digits=12, decimal_places=2, coerce_to_string=True)
    hold_at_limit = serializers.BooleanField()


class GroupMoneySerializer(serializers.Serializer):
    month = serializers.DateField(help_text="The first day of the billing month")
    plan = serializers.CharField(
        allow_null=True, help_text="The plan the group pays its group jobs under; null: members pay"
    )
    budget = BudgetSerializer(allow_null=True)
    spent = serializers.CharField(
        allow_null=True, help_text="The group's usage charges this month (PI and managers), USD, exact"
    )
    plan_fee = serializers.CharField(
        allow_null=True,
        help_text="The plan fee the group's invoice bills this month, pro rata for the days held (PI and managers)",
    )
    credit_pool = serializers.IntegerField(allow_null=True, help_text="Credits in the group's pool (PI and managers)")
    shares = ShareSerializer(many=True, help_text="By member and GPU type; a member sees their own")
    total = serializers.CharField(help_text="The sum of the shares shown, rounded to the cent")


def _month(text: str | None) -> date:
    if text is None:
        return month_of(timezone.now())
    try:
        year, month = (int(part) for part in text.split("-"))
        return date(year, month, 1)
    except ValueError:
        raise GroupError("month", "A month as YYYY-MM.") from None


class GroupMoneyView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        parameters=[
            OpenApiParameter(
                "month",
                str,
                required=False,
                description="YYYY-MM; default this month",
                pattern=r"^[1-9][0-9]{3}-(0[1-9]|1[0-2])$",
            )
        ],
        responses={200: GroupMoneySerializer, **errors(400, 401, 404)},
        summary="The group's plan, budget, credit pool and each member's cost this month (a member: their own)",
        operation_id="groups_money",
    )
    def get(self, request, pk: int):
        group = visible_group(request.user, pk)
        seen = group_money.money_seen_by(request.user, group, _month(request.query_params.get("month")))
        data = {
            "month": seen.month,
            "plan": seen.held.plan.code if seen.held else None,
            "budget": seen.budget,
            "spent": format_amount(seen.spent) if seen.spent is not None else None,
            "plan_fee": format_amount(seen.fee) if seen.fee is not None else None,
            "credit_pool": seen.pool,
            "shares": [{**row, "amount": format_amount(row["amount"] or Decimal(0))} for row in seen.shares],
            "total": f"{seen.shown_total:.2f}",
        }
        return Response(GroupMoneySerializer(data).data)


class BudgetInput(serializers.Serializer):
    monthly_amount = serializers.RegexField(
        r"^[1-9][0-9]{0,6}(\.[0-9]{1,2})?$", help_text='USD from 1 to 9,999,999.99, e.g. "500" or "1250.50"'
    )
    hold_at_limit = StrictBooleanField(default=False)


class GroupBudgetView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        request=BudgetInput,
        responses={200: BudgetSerializer, **errors(400, 401, 403, 404, 409)},
        summary="Set the group's monthly budget (PI and managers)",
        operation_id="groups_budget_set",
    )
    def put(self, request, pk: int):
        visible_group(request.user, pk)  # a group not the caller's is a 404 whatever the body
        body = BudgetInput(data=request.data)
        body.is_valid(raise_exception=True)
        budget = group_actions.save_group_budget(pk, request.user, **body.validated_data)
        return Response(BudgetSerializer(budget).data)

    @extend_schema(
        tags=TAGS,
        request=None,
        responses={204: None, **errors(401, 403, 404)},
        summary="Clear the group's budget (PI and managers)",
        operation_id="groups_budget_clear",
    )
    def delete(self, request, pk: int):
        group_actions.clear_group_budget(pk, request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class PlanInput(serializers.Serializer):
    plan = serializers.CharField(
        allow_null=True, allow_blank=True, max_length=32, help_text="A plan's code; null: none"
    )
    reason = serializers.CharField(required=False, allow_blank=True, max_length=500, default="")


class GroupPlanView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        request=PlanInput,
        responses={200: PlanInput, **errors(400, 401, 403, 404, 409)},
        summary="Give the group a plan to pay its group jobs under, or take it away (admins outside the group)",
        operation_id="groups_plan_set",
    )
    def put(self, request, pk: int):
        visible_group(request.user, pk)
        body = PlanInput(data=request.data)
        body.is_valid(raise_exception=True)
        held = group_actions.set_group_plan(
            pk, request.user, body.validated_data["plan"], body.validated_data["reason"]
        )
        return Response({"plan": held.plan.code if held else None, "reason": body.validated_data["reason"]})


class PoolInput(serializers.Serializer):
    amount = serializers.IntegerField(min_value=1, max_value=10**12, help_text="Credits to add")
    reason = serializers.CharField(max_length=500)
    idempotency_key = serializers.RegexField(r"^[A-Za-z0-9_-]{8,64}$", help_text="The same key adds once")


class PoolOutput(serializers.Serializer):
    credit_pool = serializers.IntegerField()
    added = serializers.BooleanField(help_text="False: this key had added them already")


class GroupCreditsView(GroupAPIView):
    @extend_schema(
        tags=TAGS,
        request=PoolInput,
        responses={200: PoolOutput, **errors(400, 401, 403, 404)},
        summary="Add credits to the group's pool (admins outside the group), once per idempotency key",
        operation_id="groups_credits_add",
    )
    def post(self, request, pk: int):
        group = visible_group(request.user, pk)
        group_money.require_pool_admin(request.user, group.pk)
        body = PoolInput(data=request.data)
        body.is_valid(raise_exception=True)
        values = body.validated_data
        _entry, added = credit_actions.adjust(
            None,
            values["amount"],
            actor=request.user,
            reason=values["reason"],
            key=group_money.pool_key(group.pk, values["idempotency_key"]),
            group_id=group.pk,
        )
        return Response({"credit_pool": ledger.balance(None, group_id=group.pk), "added": added})
