"""The ingest endpoint's shared steps, in the order both entry points run them:

1. `length_refusal`: the declared Content-Length, before anything is read (no length, a chunked
   body or one over MAX_BODY_BYTES is refused without reading a byte of it);
2. `authenticate`: the node token, still before the body (an unknown token never makes the
   portal buffer or parse anything);
3. the body, read up to its declared length and never further;
4. `store_batch`: parse, validate and store.

`ingest` below is the Django view (WSGI, the test client); `telemetry.asgi_ingest` serves the
same path under ASGI without Django's middleware.
"""

import json
import logging
from datetime import timedelta

from django.http import JsonResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from telemetry.actions.storage import store_samples
from telemetry.drivers import record_drivers, valid_driver
from telemetry.ingest import BatchError, WrongNode, parse_batch
from telemetry.models import OWN_CLUSTER, NodeToken

log = logging.getLogger(__name__)
LAST_SEEN_PRECISION = timedelta(seconds=60)
# An 8-GPU node's batch is ~2 KB; an agent that buffered an hour of a 16-GPU node sends
# ~600 KB. 8 MiB leaves room for aggregators without letting one request hold much memory.
MAX_BODY_BYTES = 8 * 1024 * 1024

Answer = tuple[int, dict]


def length_refusal(content_length: str | None, transfer_encoding: str | None) -> tuple[int | None, Answer | None]:
    """(declared length, None) when the headers allow reading the body, else (None, the answer).

    A chunked body is refused (411) rather than read until a cap: its size is known only by
    reading it, and agents always send a Content-Length.
    """
    if transfer_encoding:
        return None, (411, {"detail": "Send the batch with a Content-Length, not a chunked body."})
    if content_length is None or content_length.strip() == "":
        return None, (411, {"detail": "A Content-Length header is required."})
    text = content_length.strip()
    if not text.isdigit():  # also refuses "-1", "1,1" and "+5"
        return None, (400, {"detail": "The Content-Length header is not a byte count."})
    length = int(text)
    if length > MAX_BODY_BYTES:
        return None, (413, {"detail": f"The body is over {MAX_BODY_BYTES} bytes."})
    return length, None


def authenticate(authorization: str) -> NodeToken | Answer:
    """The node token named by an `Authorization: Bearer ...` header, or the 401 answer."""
    if not authorization.startswith("Bearer "):
        return 401, {"detail": "A node token is required (Authorization: Bearer gpn_...)."}
    token = NodeToken.objects.filter(key_hash=NodeToken.hash_key(authorization[7:].strip())).first()
    if token is None:
        return 401, {"detail": "Unknown or revoked node token."}
    return token


def store_batch(token: NodeToken, body: bytes) -> Answer:
    """Validate a node's batch and store it: (HTTP status, answer)."""
    try:
        payload = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return 400, {"detail": "The body is not JSON."}
    now = timezone.now()
    try:
        samples, too_old = parse_batch(payload, node=token.node, now=now, cluster=token.cluster)
    except WrongNode as exc:
        return 403, {"detail": str(exc)}
    except BatchError as exc:
        return 400, {"detail": str(exc)}
    driver = payload.get("driver_version")
    if driver is not None and not valid_driver(driver):
        return 400, {"detail": "driver_version must look like 550.54.15."}
    stored = store_samples(samples, source=str(payload.get("agent", "nvml"))[:16])
    if driver and token.cluster == OWN_CLUSTER:
        # The driver is kept on the portal's own nodes (the job form's image check reads it).
        record_drivers({token.node: driver}, source="nvml", now=now)
    errors = payload.get("errors") or []
    if isinstance(errors, list):
        # A lost GPU sends no samples (the heatmap shows it as silent); say why in the log.
        for error in errors[:50]:
            if isinstance(error, dict):
                log.warning("node %s GPU %s: %s", token, error.get("index"), str(error.get("message"))[:300])
    if token.last_seen_at is None or now - token.last_seen_at > LAST_SEEN_PRECISION:
        # Once a minute is precise enough and spares a write per batch.
        NodeToken.objects.filter(pk=token.pk).update(last_seen_at=now)
    return 202, {"accepted": stored, "dropped_too_old": too_old}


def body_size_mismatch(declared: int, received: int) -> Answer:
    if received > declared:
        return 400, {"detail": f"The body is longer than its Content-Length ({declared} bytes)."}
    return 400, {"detail": f"The body ended after {received} of its {declared} declared bytes."}


@csrf_exempt  # agents authenticate with a bearer token, never a cookie
@require_POST
def ingest(request):
    """POST /api/v1/telemetry/ingest from a node agent (telemetry/agent/gpupool_agent.py).
    Under ASGI the same path is served by telemetry.asgi_ingest, without the middleware."""
    length, refusal = length_refusal(request.META.get("CONTENT_LENGTH"), request.META.get("HTTP_TRANSFER_ENCODING"))
    if refusal is not None:
        return JsonResponse(refusal[1], status=refusal[0])
    token = authenticate(request.headers.get("Authorization", ""))
    if isinstance(token, tuple):
        return JsonResponse(token[1], status=token[0])
    # request.read(), not request.body: the stream is bounded by the Content-Length already
    # checked above, and one byte more would show a body longer than declared.
    body = request.read(length + 1)
    if len(body) != length:
        status, payload = body_size_mismatch(length, len(body))
    else:
        status, payload = store_batch(token, body)
    return JsonResponse(payload, status=status)
