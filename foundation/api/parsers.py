"""The API reads JSON only, and never more of a body than API_MAX_BODY_BYTES."""

from __future__ import annotations

import io

from django.conf import settings
from rest_framework import renderers, status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import BaseParser, JSONParser


class RequestTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self, limit: int):
        super().__init__(f"The request body is larger than this API accepts ({limit} bytes).")


def declared_length(meta) -> int:
    try:
        return int(meta.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


class CappedJSONParser(BaseParser):
    """JSON with a size cap. Not a JSONParser subclass on purpose: DRF reads the whole body
    into memory before it calls one (`Request._parse`), and this parser must look at
    Content-Length first and then read at most one byte past the cap."""

    media_type = "application/json"
    renderer_class = renderers.JSONRenderer

    def parse(self, stream, media_type=None, parser_context=None):
        parser_context = parser_context or {}
        limit = settings.API_MAX_BODY_BYTES
        request = parser_context.get("request")
        if request is not None and declared_length(request.META) > limit:
            raise RequestTooLarge(limit)
        data = stream.read(limit + 1)
        if len(data) > limit:
            raise RequestTooLarge(limit)
        try:
            return JSONParser().parse(io.BytesIO(data), media_type, parser_context)
        except RecursionError:
            # "[[[[..." nested thousands deep is valid JSON that Python's decoder gives up on.
            raise ParseError("JSON parse error - nested too deeply") from None
