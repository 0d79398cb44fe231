"""Renderers for responses that are files (PDF, CSV, JSON lines): they let a client ask for the
file type (`Accept: text/csv`) without a 406, while a refusal still carries the API's JSON
error body."""

from __future__ import annotations

from rest_framework.renderers import BaseRenderer, JSONRenderer


class FileRenderer(BaseRenderer):
    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, bytes | str):
            return data
        return JSONRenderer().render(data)


class PdfRenderer(FileRenderer):
    media_type = "application/pdf"
    format = "pdf"


class CsvRenderer(FileRenderer):
    media_type = "text/csv"
    format = "csv"


class JsonLinesRenderer(FileRenderer):
    media_type = "application/jsonl"
    format = "jsonl"


class NdjsonRenderer(JsonLinesRenderer):
    """JSON lines by their other common name (what most tools send as `Accept`)."""

    media_type = "application/x-ndjson"
    format = "ndjson"


class OctetStreamRenderer(FileRenderer):
    media_type = "application/octet-stream"
    format = "bin"
