"""GET /api/v1/datasets/{id}/versions/{n}/files/{path}: one file of a ready version, streamed.

Who may: whoever may read the dataset (datasets.queries.readable_dataset; anyone else gets the
404 of a file that does not exist). Only files the version's manifest lists (a DatasetFile row),
opened in the store one component at a time without following links. At most the file's
recorded size is sent, so a file that changed on disk cannot make the answer longer than its
Content-Length; the sha256 is in `Digest` (RFC 3230) and the ETag.

Under ASGI the body is an async iterator that reads a block at a time in a thread:
Django reads a sync iterator whole before sending it, which for a 50 GB file is not an option."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import Http404, StreamingHttpResponse

from datasets import storage
from datasets.models import DatasetFile, VersionState
from datasets.queries import DatasetError

BLOCK = 1024 * 1024


def _blocks(fd: int, size: int) -> Iterator[bytes]:
    try:
        position = 0
        while position < size:
            block = os.pread(fd, min(BLOCK, size - position), position)
            if not block:
                return
            position += len(block)
            yield block
    finally:
        os.close(fd)


async def _async_blocks(fd: int, size: int) -> AsyncIterator[bytes]:
    """`_blocks`, each read in a worker thread."""
    blocks = _blocks(fd, size)
    read_next = sync_to_async(next, thread_sensitive=False)
    try:
        while (block := await read_next(blocks, None)) is not None:
            yield block
    finally:
        blocks.close()


def file_response(request, version, path: str) -> StreamingHttpResponse:
    """The file, or Http404 (not ready, not in the manifest, missing on disk)."""
    if version.state != VersionState.READY:
        raise Http404("Only a ready version's files can be downloaded.")
    row = DatasetFile.objects.filter(version=version, path=path).first()
    if row is None:
        raise Http404("No such file in this version.")
    try:
        fd = storage.open_version_file(version.pk, row.path)
    except storage.StorageError as exc:
        raise DatasetError("file", "The file is missing from the store; an admin can see why.", 404) from exc
    blocks = _async_blocks if isinstance(request._request, ASGIRequest) else _blocks
    response = StreamingHttpResponse(blocks(fd, row.size_bytes), content_type="application/octet-stream")
    response["Content-Length"] = str(row.size_bytes)
    name = row.path.rsplit("/", 1)[-1]
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{_quote(name)}"
    response["Digest"] = "sha-256=" + base64.b64encode(bytes.fromhex(row.sha256)).decode()
    response["ETag"] = f'"{row.sha256}"'
    return response


def _quote(name: str) -> str:
    return quote(name, safe="")  # RFC 5987's filename*
