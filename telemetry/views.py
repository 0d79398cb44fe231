import json
import logging

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from telemetry.ingest import BatchError, WrongNode, parse_batch
from telemetry.models import NodeToken
from telemetry.storage import store_samples

log = logging.getLogger(__name__)


@csrf_exempt  # agents authenticate with a bearer token, never a cookie
@require_POST
def ingest(request):
    """POST /api/v1/telemetry/ingest from a node agent (telemetry/agent/gpupool_agent.py)."""
    header = request.headers.get("Authorization", "")
    if not header.startswith("Bearer "):
        return JsonResponse({"detail": "A node token is required (Authorization: Bearer gpn_...)."}, status=401)
    token = NodeToken.objects.filter(key_hash=NodeToken.hash_key(header[7:].strip())).first()
    if token is None:
        return JsonResponse({"detail": "Unknown or revoked node token."}, status=401)
    try:
        payload = json.loads(request.body)
    except (ValueError, UnicodeDecodeError):
        return JsonResponse({"detail": "The body is not JSON."}, status=400)
    now = timezone.now()
    try:
        samples, too_old = parse_batch(payload, node=token.node, now=now)
    except WrongNode as exc:
        return JsonResponse({"detail": str(exc)}, status=403)
    except BatchError as exc:
        return JsonResponse({"detail": str(exc)}, status=400)
    stored = store_samples(samples, source=str(payload.get("agent", "nvml"))[:16])
    errors = payload.get("errors") or []
    if isinstance(errors, list) and errors:
        # A lost GPU sends no samples (the heatmap shows it as silent); say why in the log.
        for error in errors[:50]:
            if isinstance(error, dict):
                log.warning("node %s GPU %s: %s", token.node, error.get("index"), str(error.get("message"))[:300])
    NodeToken.objects.filter(pk=token.pk).update(last_seen_at=now)
    return JsonResponse({"accepted": stored, "dropped_too_old": too_old}, status=202)
