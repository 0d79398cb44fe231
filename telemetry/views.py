import json
import logging
from datetime import timedelta

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from telemetry.ingest import BatchError, WrongNode, parse_batch
from telemetry.models import NodeToken
from telemetry.storage import store_samples

log = logging.getLogger(__name__)
LAST_SEEN_PRECISION = timedelta(seconds=60)


def handle_batch(authorization: str, body: bytes) -> tuple[int, dict]:
    """Authenticate a node agent's batch, validate it and store it: (HTTP status, answer)."""
    if not authorization.startswith("Bearer "):
        return 401, {"detail": "A node token is required (Authorization: Bearer gpn_...)."}
    token = NodeToken.objects.filter(key_hash=NodeToken.hash_key(authorization[7:].strip())).first()
    if token is None:
        return 401, {"detail": "Unknown or revoked node token."}
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return 400, {"detail": "The body is not JSON."}
    now = timezone.now()
    try:
        samples, too_old = parse_batch(payload, node=token.node, now=now)
    except WrongNode as exc:
        return 403, {"detail": str(exc)}
    except BatchError as exc:
        return 400, {"detail": str(exc)}
    stored = store_samples(samples, source=str(payload.get("agent", "nvml"))[:16])
    errors = payload.get("errors") or []
    if isinstance(errors, list):
        # A lost GPU sends no samples (the heatmap shows it as silent); say why in the log.
        for error in errors[:50]:
            if isinstance(error, dict):
                log.warning("node %s GPU %s: %s", token.node, error.get("index"), str(error.get("message"))[:300])
    if token.last_seen_at is None or now - token.last_seen_at > LAST_SEEN_PRECISION:
        # Once a minute is precise enough and spares a write per batch.
        NodeToken.objects.filter(pk=token.pk).update(last_seen_at=now)
    return 202, {"accepted": stored, "dropped_too_old": too_old}


@csrf_exempt  # agents authenticate with a bearer token, never a cookie
@require_POST
def ingest(request):
    """POST /api/v1/telemetry/ingest from a node agent (telemetry/agent/gpupool_agent.py).
    Under ASGI the same path is served by telemetry.asgi_ingest, without the middleware."""
    status, payload = handle_batch(request.headers.get("Authorization", ""), request.body)
    return JsonResponse(payload, status=status)
