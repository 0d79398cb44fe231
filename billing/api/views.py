"""POST /api/v1/billing/quote: what a job would cost, line by line, at the prices in force."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework.decorators import api_view
from rest_framework.response import Response

from billing.api.serializers import QuoteInputSerializer, QuoteSerializer
from billing.pricing import PricingError, format_amount, format_quantity, to_cents
from billing.quotes import JobQuote, quote_job
from foundation.api.errors import error_responses
from groups.queries import GroupError, default_group, group_to_charge
from jobs.submission.datasets import dataset_gb, mounts_of
from jobs.submission.spec import SpecError
from plans.catalog import plan_by_code
from plans.models import Plan
from plans.rates import NoRateCard

ERROR_DESCRIPTIONS = {
    400: "Bad input: `errors` names each field and what is wrong with it (an unknown field, a group not yours)",
    401: "No credentials, or an unknown or revoked token",
    403: "With the session cookie: no CSRF token",
    404: "No plan with that code (`errors.plan`)",
    409: "No rate card in force, or the card has no price for this GPU type (`errors.gpu_type`)",
    413: "The body is larger than the API accepts",
    415: "The body is not JSON",
}


def _quote_body(result: JobQuote, gpu_count: int) -> dict:
    rates = result.rates
    covered = result.covered
    body = {
        "gpu_type": result.run.gpu_type,
        "gpu_count": gpu_count,
        "shards": result.run.shards,
        "seconds": result.run.seconds,
        "runs": result.runs,
        "spot": result.run.is_spot,
        "plan": result.plan.code,
        "payer": f"group {result.group_id}" if result.group_id else "you",
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
            "gpu_price_per_second": format_quantity(rates.gpu_price(result.run.gpu_type)),
            "gpu_price_from": rates.gpu_price_source(result.run.gpu_type),
            "gpu_memory_price_per_gb_second": format_quantity(rates.gpu_memory_gb_second),
            "nvme_price_per_gb_hour": format_quantity(rates.nvme_gb_hour),
        },
        "coverage": None,
    }
    if covered is not None:
        body["coverage"] = {
            "gpu_seconds": covered.to_cover,
            "plan_gpu_seconds_left": result.plan_gpu_seconds_left,
            "credit_gpu_seconds": result.credit_gpu_seconds,
            "covered_gpu_seconds": covered.included + covered.credited,
            "included_gpu_seconds": covered.included,
            "credited_gpu_seconds": covered.credited,
            "payable": format_amount(to_cents(covered.amount)),
            "payable_exact": format_amount(covered.amount),
        }
    return body


def _flat(errors: dict) -> dict[str, list[str]]:
    """DRF's errors with a list's items' errors ({"0": [...]}) as sentences of the field's own."""
    flat = {}
    for name, found in errors.items():
        if isinstance(found, dict):
            flat[name] = [f"item {index}: {message}" for index, messages in found.items() for message in messages]
        else:
            flat[name] = [str(message) for message in found]
    return flat


def _refused(field_name: str, message: str, status: int = 400) -> Response:
    return Response({"detail": message, "errors": {field_name: [message]}}, status=status)


def _group_of(user, values):
    """The group the job would be charged to: the one named, the user's default when the field
    is absent, none when it is null. GroupError when the user may not charge it."""
    if "group" not in values:
        return default_group(user)
    if values["group"] is None:
        return None
    # A quote records nothing: checked as a submission is, without its lock.
    return group_to_charge(user, values["group"], lock=False)


@extend_schema(
    operation_id="billing_quote",
    summary="What a job would cost: lines and total as decimal strings, at the prices in force now",
    description=(
        "Charge = GPU-seconds x GPU price + GPU-memory GB-seconds x memory price + NVMe GB-hours x NVMe price. "
        "Takes a whole job as POST /api/v1/jobs/ does (spot, group, cluster, datasets; the fields that change no "
        "price are accepted, unknown ones refused), or `seconds` and `runs` (a sweep's tasks). The plan: the one "
        "that would pay (the group's when the job is charged to a group that holds one). "
        "Amounts are exact; `amount_rounded` and `total_rounded` round each line half-up to the cent, as an "
        "invoice does. Prices: the rate card the plan pays (`list`; Enterprise: `enterprise`) in force now; a spot "
        "job pays each time window's share from now. `total` is the price with nothing covered; `coverage` says "
        "what the payer's included plan hours and credits would cover now and what is left to pay (`payable`), "
        "split by the same rule that charges a finished run."
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
    if not isinstance(request.data, dict):
        return Response({"detail": "The quote's input is a JSON object."}, status=400)
    data = QuoteInputSerializer(data=request.data)
    if not data.is_valid():
        return Response({"detail": "The quote's input is invalid.", "errors": _flat(data.errors)}, status=400)
    values = data.validated_data
    plan = None
    code = values.get("plan")
    if code:
        try:
            plan = plan_by_code(code)
        except Plan.DoesNotExist:
            return _refused("plan", f"There is no plan {code!r}.", 404)
    try:
        group = _group_of(request.user, data.initial_data)
    except GroupError as exc:
        return _refused(exc.field, exc.message, exc.status)
    try:
        nvme_gb = values["nvme_gb"] + dataset_gb(mounts_of(request.user, values.get("datasets") or []))
    except SpecError as exc:
        return Response({"detail": exc.summary(), "errors": exc.errors}, status=400)
    try:
        result = quote_job(
            request.user,
            gpu_type=values["gpu_type"],
            gpu_count=values["gpu_count"],
            gpu_memory_gb=values["gpu_memory_gb"],
            nvme_gb=nvme_gb,
            seconds=values["seconds"],
            spot=bool(values.get("spot")),
            group=group,
            plan=plan,
            runs=values["runs"],
        )
    except NoRateCard as exc:
        return Response({"detail": f"Prices are not set: {exc}."}, status=409)
    except PricingError as exc:
        return Response({"detail": str(exc), "errors": {exc.field: [exc.message]}}, status=409)
    return Response(QuoteSerializer(_quote_body(result, values["gpu_count"])).data)
