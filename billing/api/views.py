"""POST /api/v1/billing/quote: what a job would cost, line by line, at the prices in force."""

from decimal import Decimal

from django.utils import timezone
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from billing.api.serializers import QuoteInputSerializer, QuoteSerializer
from billing.invoices.drafts import month_of
from billing.pricing import (
    SECONDS_PER_HOUR,
    PricingError,
    divide,
    format_amount,
    format_quantity,
    quote,
    to_cents,
)
from billing.usage.usage_page import invoice_month
from credits import ledger
from credits.weights import NoBurnWeight, weight_for
from foundation.api.errors import error_responses
from plans.catalog import plan_by_code, plan_for
from plans.models import Plan
from plans.rates import NoRateCard, rates_for_plan

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field and what is wrong with it",
    401: "No credentials, or an unknown or revoked token",
    403: "With the session cookie: no CSRF token",
    404: "No plan with that code (`errors.plan`)",
    409: "No rate card in force, or the card has no price for this GPU type (`errors.gpu_type`)",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
}


def _quote_body(result, plan_code: str, gpu_count: int, seconds: int) -> dict:
    rates = result.rates
    return {
        "gpu_type": result.gpu_type,
        "gpu_count": gpu_count,
        "seconds": seconds,
        "plan": plan_code,
        "currency": "USD",
        "lines": [
            {
                "kind": line.kind,
                "description": line.description,
                "quantity": format_quantity(line.quantity),
                "unit": line.unit,
                "unit_price": format_quantity(line.unit_price),
                "amount": format_amount(line.amount),
                "amount_rounded": format_amount(line.amount_rounded),
            }
            for line in result.lines
        ],
        "total": format_amount(result.total),
        "total_rounded": format_amount(result.total_rounded),
        "rates": {
            "card": rates.card,
            "name": rates.name,
            "effective_from": rates.effective_from,
            "gpu_price_per_second": format_quantity(rates.gpu_price(result.gpu_type)),
            "gpu_price_from": rates.gpu_price_source(result.gpu_type),
            "gpu_memory_price_per_gb_second": format_quantity(rates.gpu_memory_gb_second),
            "nvme_price_per_gb_hour": format_quantity(rates.nvme_gb_hour),
        },
    }


@extend_schema(
    operation_id="billing_quote",
    summary="What a job would cost: lines and total as decimal strings, at the prices in force now",
    description=(
        "Charge = GPU-seconds x GPU price + GPU-memory GB-seconds x memory price + NVMe GB-hours x NVMe price. "
        "Amounts are exact; `amount_rounded` and `total_rounded` round each line half-up to the cent, as an "
        "invoice does. Prices: the rate card the plan pays (`list`; Enterprise: `enterprise`) in force now. "
        "`coverage` says how much of it your included plan hours and credits "
        "would cover now (the amounts are before them)."
    ),
    request=QuoteInputSerializer,
    responses={200: QuoteSerializer, **error_responses(ERROR_DESCRIPTIONS, 400, 401, 403, 404, 409, 413, 415)},
    examples=[
        OpenApiExample(
            "The article's example (1 A100, 30 min, 24 GB, 500 GB NVMe; list prices: $8.564)",
            request_only=True,
            value={
                "gpu_type": "a100",
                "gpu_count": 1,
                "seconds": 1800,
                "gpu_memory_gb": 24,
                "nvme_gb": 500,
                "plan": "pro",
            },
        )
    ],
    tags=["billing"],
)
@api_view(["POST"])
def billing_quote(request):
    data = QuoteInputSerializer(data=request.data)
    if not data.is_valid():
        return Response({"detail": "The quote's input is invalid.", "errors": data.errors}, status=400)
    values = data.validated_data
    code = values.get("plan")
    if code:
        try:
            plan = plan_by_code(code)
        except Plan.DoesNotExist:
            return Response(
                {"detail": f"There is no plan {code!r}.", "errors": {"plan": ["no plan with this code"]}}, status=404
            )
    else:
        plan = plan_for(request.user)
    try:
        rates = rates_for_plan(plan)
        result = quote(
            values["gpu_type"],
            values["gpu_count"],
            values["seconds"],
            values["gpu_memory_gb"],
            values["nvme_gb"],
            rates=rates,
        )
    except NoRateCard as exc:
        return Response({"detail": f"Prices are not set: {exc}."}, status=409)
    except PricingError as exc:
        return Response({"detail": str(exc), "errors": {exc.field: [exc.message]}}, status=409)
    body = _quote_body(result, plan.code, values["gpu_count"], values["seconds"])
    own = plan_for(request.user)
    if own.code == plan.code:
        cover = coverage(request.user, own, values["gpu_type"], values["gpu_count"] * values["seconds"])
        cover["payable"] = format_amount(to_cents(payable(result, own, cover, values)))
        body["coverage"] = cover
    else:
        body["coverage"] = None
    return Response(QuoteSerializer(body).data)


def payable(result, plan, cover: dict, values: dict) -> Decimal:
    """What the caller would pay of the quote, by charging's own split (billing/charging.py):
    a free plan's capped hours bill nothing; the GPU line is billed for the GPU-seconds that
    neither plan hours nor credits cover; GPU memory and the NVMe cache beyond the plan's
    included NVMe are billed for the same uncovered share. Exact; the caller rounds."""
    if plan.included_hours_are_a_cap:
        return Decimal(0)
    lines = {line.kind: line for line in result.lines}
    to_cover = cover["gpu_seconds"]
    billable = to_cover - cover["covered_gpu_seconds"]
    nvme_beyond = max(0, values["nvme_gb"] - plan.included_nvme_gb)
    nvme = divide(Decimal(nvme_beyond * values["seconds"]) * result.rates.nvme_gb_hour, SECONDS_PER_HOUR)
    if not to_cover:  # a shard job: memory and NVMe, nothing covered (charging: credits skip shards)
        return lines["gpu_memory"].amount + nvme
    gpu = billable * lines["gpu"].unit_price
    return gpu + divide((lines["gpu_memory"].amount + nvme) * billable, to_cover)


def coverage(user, plan, gpu_type: str, gpu_seconds: int) -> dict:
    """What the caller's included hours and credits would cover of `gpu_seconds`, as charging
    would take them now (billing/charging.py: plan hours first, then credits)."""
    _charges, included_used = invoice_month(user.pk, month_of(timezone.now()))
    hours = plan.included_gpu_hours.get(gpu_type, 0)
    plan_left = max(0, hours * SECONDS_PER_HOUR - included_used.get(gpu_type, 0))
    try:
        weight = weight_for(gpu_type)
        credit = int(ledger.spendable_balance(user.pk) / weight) if weight > 0 else 0
    except NoBurnWeight:
        credit = 0
    return {
        "gpu_seconds": gpu_seconds,
        "plan_gpu_seconds_left": plan_left,
        "credit_gpu_seconds": credit,
        "covered_gpu_seconds": min(gpu_seconds, plan_left + credit),
    }
