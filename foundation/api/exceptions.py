"""Every refusal of the API has one shape (foundation.api.errors.ErrorSerializer):
{"detail": "...", "errors": {"field": ["message", ...]}}, `errors` only for bad input.

The database not answering (PostgreSQL restarting) is a 503 in that shape, not a bare 500:
a read says when to try again; a write says it may have been recorded, because the database
can fail after the commit (the submission's hand-over to Slurm runs then), and a client that
simply sent a submission again could have two jobs.

Bad input is raised, not answered: a view calls `serializer.is_valid(raise_exception=True)` and the
400 comes from here, {"detail": INVALID, "errors": ...}, the same as foundation.api.errors.invalid."""

from django.db import InterfaceError, OperationalError
from rest_framework.permissions import SAFE_METHODS
from rest_framework.response import Response
from rest_framework.views import exception_handler

from foundation.api.errors import INVALID, field_messages

DATABASE_RETRY_SECONDS = 5


def database_unavailable(request) -> Response:
    if request is not None and request.method not in SAFE_METHODS:
        detail = (
            "The portal's database is not answering. Your request may or may not have been recorded: "
            "look (for example at your jobs) before sending it again."
        )
        return Response({"detail": detail}, status=503)
    detail = "The portal's database is not answering; try again in a few seconds."
    return Response({"detail": detail}, status=503, headers={"Retry-After": str(DATABASE_RETRY_SECONDS)})


def api_exception_handler(exc, context):
    if isinstance(exc, OperationalError | InterfaceError):
        return database_unavailable(context.get("request"))
    response = exception_handler(exc, context)
    if response is None:
        return None
    data = response.data
    if isinstance(data, dict) and "detail" in data:
        return response
    response.data = {"detail": INVALID, "errors": field_messages(data)}
    return response
