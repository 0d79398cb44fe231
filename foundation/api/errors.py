"""The one shape of every API refusal, shared by every app's API: {"detail": "...",
"errors": {"field": ["message", ...]}}, `errors` only for bad input."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse
from rest_framework import serializers
from rest_framework.response import Response


class ErrorSerializer(serializers.Serializer):
    """Every refusal: a sentence, and for bad input the messages by field."""

    detail = serializers.CharField()
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Field name -> messages (bad input only)",
    )


INVALID = "The request is invalid."


def field_messages(errors) -> dict[str, list[str]]:
    """A serializer's errors in that shape: a list's or a nested object's own errors (DRF nests
    them, {"tasks": {0: [...]}}) become sentences that say where ("item 0: ...")."""
    if not isinstance(errors, dict):
        return {"non_field_errors": _sentences(errors)}
    return {str(name): _sentences(value) for name, value in errors.items()}


def _sentences(value, where: str = "") -> list[str]:
    if isinstance(value, dict):
        return [
            sentence
            for key, inner in value.items()
            for sentence in _sentences(inner, f"{where}{'item ' if isinstance(key, int) else ''}{key}: ")
        ]
    if isinstance(value, list | tuple):
        return [sentence for item in value for sentence in _sentences(item, where)]
    return [f"{where}{value}"]


def invalid(serializer) -> Response:
    """The 400 for a serializer that did not validate."""
    return Response({"detail": INVALID, "errors": field_messages(serializer.errors)}, status=400)


class StrictBooleanField(serializers.BooleanField):
    """A JSON true or false: DRF's BooleanField would also take "yes", 1 and "on"."""

    def to_internal_value(self, data):
        if not isinstance(data, bool):
            self.fail("invalid", input=data)
        return data


class StrictCharField(serializers.CharField):
    """A JSON string: DRF's CharField would also take 0 or true and store their text."""

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


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
