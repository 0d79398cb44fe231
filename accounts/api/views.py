"""GET/POST /api/v1/plan: the caller's plan and the plans offered; switch, pause, resume
(accounts.actions.plan_choice, the same rules as the page). Money is decimal strings."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import serializers
from rest_framework.decorators import api_view
from rest_framework.response import Response

from accounts.actions import plan_choice
from foundation.api.errors import error_responses
from plans.models import Subscription

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names the field (`action`, `plan`) and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "With the session cookie: no CSRF token",
    404: "No plan with that code is offered (`errors.plan`)",
    409: "Not possible now: already on that plan, nothing to pause (no monthly fee), not paused",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
}
MONEY = {"max_digits": 12, "decimal_places": 6, "coerce_to_string": True}


class OfferedPlanSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()
    monthly_price = serializers.DecimalField(**MONEY, help_text="USD a month, in force this billing month")
    next_monthly_price = serializers.DecimalField(
        **MONEY, allow_null=True, help_text="USD a month from next month when it changes, else null"
    )
    included_gpu_hours = serializers.DictField(child=serializers.IntegerField(), help_text="GPU type -> hours a month")
    rates_per_second = serializers.DictField(
        child=serializers.DecimalField(**MONEY),
        help_text="GPU type -> USD a GPU-second, for a plan paid per second (its rate card in force now), else empty",
    )
    gpu_quota = serializers.DictField(child=serializers.IntegerField(), help_text="GPU type -> GPUs at once")
    max_job_hours = serializers.DecimalField(max_digits=8, decimal_places=2, coerce_to_string=True)
    official_images_only = serializers.BooleanField()
    included_nvme_gb = serializers.IntegerField()
    current = serializers.BooleanField()


class PlanStandingSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()
    status = serializers.ChoiceField(choices=Subscription.Status.choices)
    since = serializers.DateTimeField(allow_null=True)
    monthly_price = serializers.DecimalField(**MONEY, help_text="USD a month, in force this billing month")
    can_pause = serializers.BooleanField()
    can_resume = serializers.BooleanField()
    offered = OfferedPlanSerializer(many=True)


class PlanChoiceSerializer(serializers.Serializer):
    action = serializers.ChoiceField(choices=plan_choice.ACTIONS)
    plan = serializers.CharField(required=False, allow_blank=True, max_length=32, help_text="With `switch`")


@extend_schema(
    methods=["GET"],
    operation_id="plan_show",
    summary="Your plan, its status and monthly price, and the plans offered",
    responses={200: PlanStandingSerializer, **error_responses(ERROR_DESCRIPTIONS, 401)},
    tags=["plan"],
)
@extend_schema(
    methods=["POST"],
    operation_id="plan_change",
    summary="Switch to another offered plan, or pause / resume a plan with a monthly fee",
    description=(
        "Fees are by day: each day is billed to every subscription that held any moment of it (billing "
        "time zone), so a change is billed from the day it is made. A paused plan is not charged for "
        "days it was paused all day, and refuses new jobs. At most PLAN_CHANGES_PER_DAY changes (3 by "
        "default) in any 24 hours; a further one is refused (409) with the time the next is possible. "
        "Answers the plan as `GET` shows it after the change."
    ),
    request=PlanChoiceSerializer,
    responses={200: PlanStandingSerializer, **error_responses(ERROR_DESCRIPTIONS, 400, 401, 403, 404, 409, 413, 415)},
    examples=[OpenApiExample("Switch to Pro", request_only=True, value={"action": "switch", "plan": "pro"})],
    tags=["plan"],
)
@api_view(["GET", "POST"])
def plan_view(request):
    if request.method == "POST":
        data = PlanChoiceSerializer(data=request.data)
        if not data.is_valid():
            return Response({"detail": "The plan change is invalid.", "errors": data.errors}, status=400)
        try:
            plan_choice.choose(request.user, data.validated_data["action"], data.validated_data.get("plan", ""))
        except plan_choice.PlanChoiceError as exc:
            body = {"detail": exc.message}
            if exc.status in (400, 404):
                body["errors"] = {exc.field: [exc.message]}
            return Response(body, status=exc.status)
    return Response(PlanStandingSerializer(plan_choice.standing(request.user)).data)
