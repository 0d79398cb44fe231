"""GET /api/v1/jobs/export: every one of the caller's jobs in one streamed response, JSON lines
(default) or CSV (`?as=csv`, or `Accept: text/csv`), newest first.

Rows come in keyset chunks of CHUNK_ROWS on the (owner, -created_at, -id) index and are
written as they are read, so memory and the time to the first byte do not grow with the
number of jobs; nothing is computed per row beyond formatting. A job's cost is not a column: it is the sum of
its metered runs, on the job's page and in `GET /api/v1/jobs/{id}/`. A CSV cell that starts
with = + - @ is prefixed with ' (spreadsheets run formulas)."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterator, Iterator
from datetime import datetime

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.db.models import Q
from django.http import StreamingHttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, renderer_classes
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from foundation.api.renderers import CsvRenderer, JsonLinesRenderer, NdjsonRenderer
from jobs.api.clusters import CLUSTER_FILTER, cluster_filter
from jobs.api.schema import errors
from jobs.models import Job

COLUMNS = (
    "id", "uuid", "cluster", "slurm_job_id", "name", "state", "state_reason", "image", "gpu_type", "tres_per_node",
    "nodes", "qos", "account", "group_id", "time_limit_minutes", "submit_time", "start_time", "end_time",
    "exit_code", "created_at",
)  # fmt: skip
CHUNK_ROWS = 2000


def _plain(value):
    """What JSON has no type for, as text: a time in ISO 8601, a UUID or anything else by str()."""
    if isinstance(value, datetime):
        return value.isoformat()
    if value is None or isinstance(value, int | str | bool):
        return value
    return str(value)


def _cell(value) -> str:
    text = "" if value is None else str(_plain(value))
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text


def _columns() -> list[str]:
    existing = {field.attname for field in Job._meta.concrete_fields}
    return [column for column in COLUMNS if column in existing]


def chunk_after(user_id: int, columns: list[str], after: tuple | None, cluster: str | None = None) -> list[tuple]:
    """The next CHUNK_ROWS rows, newest first, after the (created_at, id) key `after`: a
    keyset page on the (owner, -created_at, -id) index, so every chunk costs the same and no
    cursor stays open between chunks (an ASGI response reads each chunk in a worker thread)."""
    query = Job.objects.filter(owner_id=user_id)
    if cluster is not None:
        query = query.filter(cluster=cluster)
    if after is not None:
        created, pk = after
        query = query.filter(Q(created_at__lt=created) | Q(created_at=created, id__lt=pk))
    return list(query.order_by("-created_at", "-id").values_list(*columns, "created_at", "id")[:CHUNK_ROWS])


class JsonLines:
    """Rows to JSON lines, 500 a piece."""

    def __init__(self, columns: tuple):
        self.columns = columns

    def header(self) -> str:
        return ""

    def piece(self, rows: list[tuple]) -> str:
        # `default` is called only for what JSON lacks (times, UUIDs): no Python per plain value.
        encode = json.JSONEncoder(default=_plain).encode
        columns = self.columns
        return "".join(encode(dict(zip(columns, row, strict=True))) + "\n" for row in rows)


class CsvText(JsonLines):
    """Rows to CSV, 500 a piece, after a header row."""

    def _lines(self, rows) -> str:
        out = io.StringIO()
        csv.writer(out).writerows(rows)
        return out.getvalue()

    def header(self) -> str:
        return self._lines([self.columns])

    def piece(self, rows: list[tuple]) -> str:
        return self._lines([[_cell(value) for value in row] for row in rows])


PIECE_ROWS = 500


def pieces(writer, chunk: list[tuple], width: int) -> Iterator[str]:
    """A chunk's rows, less their keyset columns, as the writer's pieces of PIECE_ROWS rows."""
    for start in range(0, len(chunk), PIECE_ROWS):
        yield writer.piece([row[:width] for row in chunk[start : start + PIECE_ROWS]])


def stream(user_id: int, kind, cluster: str | None = None) -> Iterator[str]:
    columns = _columns()
    writer = kind(tuple(columns))
    yield writer.header()
    after = None
    while True:
        chunk = chunk_after(user_id, columns, after, cluster)
        yield from pieces(writer, chunk, len(columns))
        if len(chunk) < CHUNK_ROWS:
            return
        after = chunk[-1][-2:]


async def async_stream(user_id: int, kind, cluster: str | None = None) -> AsyncIterator[str]:
    """`stream` for an ASGI response: each chunk is read in a worker thread."""
    columns = _columns()
    writer = kind(tuple(columns))
    yield writer.header()
    after = None
    while True:
        chunk = await sync_to_async(chunk_after)(user_id, columns, after, cluster)
        for piece in pieces(writer, chunk, len(columns)):
            yield piece
        if len(chunk) < CHUNK_ROWS:
            return
        after = chunk[-1][-2:]


@extend_schema(
    operation_id="jobs_export",
    summary="Every one of the caller's jobs in one streamed response: JSON lines, or CSV with as=csv",
    parameters=[
        OpenApiParameter("as", str, enum=["jsonl", "csv"], required=False, description="Default jsonl"),
        CLUSTER_FILTER,
    ],
    responses={
        (200, "application/jsonl"): OpenApiResponse(OpenApiTypes.STR),
        (200, "application/x-ndjson"): OpenApiResponse(OpenApiTypes.STR),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR),
        # 400: an `as` not in the list or an unknown cluster; 404: an unknown `format` (DRF's renderer override).
        **errors(400, 401, 404),
    },
    tags=["jobs"],
)
@api_view(["GET"])
@renderer_classes([JSONRenderer, JsonLinesRenderer, NdjsonRenderer, CsvRenderer])
def export(request):
    chosen = request.query_params.get("as")
    if chosen is not None and chosen not in ("jsonl", "csv"):
        return Response(
            {"detail": "The request is invalid.", "errors": {"as": ["jsonl or csv."]}},
            status=status.HTTP_400_BAD_REQUEST,
        )
    cluster = cluster_filter(request.query_params, Job.objects.filter(owner=request.user))
    wants_csv = chosen == "csv" or (chosen is None and "text/csv" in request.headers.get("Accept", ""))
    # JSON lines go out under the name the client asked for them by (application/x-ndjson too).
    lines_type = request.accepted_renderer.media_type if request.accepted_renderer.format == "ndjson" else None
    kind, content_type, name = (
        (CsvText, "text/csv; charset=utf-8", "jobs.csv")
        if wants_csv
        else (JsonLines, lines_type or "application/jsonl", "jobs.jsonl")
    )
    # Under ASGI Django streams only an async iterator (a sync one is read whole
    # first); under WSGI and the test client, a sync one.
    if isinstance(request._request, ASGIRequest):
        content = async_stream(request.user.pk, kind, cluster)
    else:
        content = stream(request.user.pk, kind, cluster)
    response = StreamingHttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
