"""The one shape of every API refusal, shared by every app's API: {"detail": "...",
"errors": {"field": ["message", ...]}}, `errors` only for bad input."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers


class ErrorSerializer(serializers.Serializer):
    """Every refusal: a sentence, and for bad input the messages by field."""

    detail = serializers.CharField()
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Field name -> messages (bad input only)",
    )


def error_responses(descriptions: dict[int, str], *codes: int) -> dict[int, OpenApiResponse]:
    """`responses` entries for the refusals an operation can answer, each with its body."""
    return {code: OpenApiResponse(ErrorSerializer, description=descriptions[code]) for code in codes}


RETRY_AFTER = OpenApiParameter(
    "Retry-After",
    OpenApiTypes.INT,
    location=OpenApiParameter.HEADER,
    response=[429],
    required=True,
    description="Seconds until a request may succeed again",
)
