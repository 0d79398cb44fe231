"""A file's bytes as a streamed response that holds one block at a time, whichever handler serves it.

The portal serves HTTP through Django's WSGI handler on threads (gpupool/asgi_http.py), where a
plain iterator streams. Django's own ASGI handler instead reads a synchronous body whole before
it sends it (a FileResponse included: a 200 MB file took its process from 91 to 294 MB, measured
in-process), so under an ASGIRequest the body is an async iterator that reads a block at a time
in a worker thread. At most `size` bytes are sent, so a file that grows while it is read cannot
make the answer longer than its Content-Length. One helper for every download (a job's files
and folders, logs, dataset files)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from urllib.parse import quote

from asgiref.sync import sync_to_async
from django.core.handlers.asgi import ASGIRequest
from django.http import StreamingHttpResponse

BLOCK = 1024 * 1024


def blocks(fd: int, size: int) -> Iterator[bytes]:
    """The file's first `size` bytes, a block at a time; closes `fd` when done or dropped."""
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


def file_response(
    request, fd: int, size: int, *, filename: str, content_type: str = "application/octet-stream", inline=False
) -> StreamingHttpResponse:
    """The response for an open file (this takes `fd` over and closes it). `request`: Django's or
    DRF's; `inline`: shown by the browser (an image's preview) rather than saved."""
    response = StreamingHttpResponse(_served(request, blocks(fd, size)), content_type=content_type)
    response["Content-Length"] = str(size)
    disposition = "inline" if inline else "attachment"
    response["Content-Disposition"] = f"{disposition}; filename*=UTF-8''{quote(filename, safe='')}"
    return response


def _served(request, chunks: Iterator[bytes]):
    """`chunks` as the handler of `request` (Django's or DRF's) streams them: as they are under
    WSGI, each made in a worker thread under Django's ASGI handler."""
    django_request = getattr(request, "_request", request)
    return _in_threads(chunks) if isinstance(django_request, ASGIRequest) else chunks


async def _in_threads(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """A synchronous iterator's chunks, each made in a worker thread."""
    make_next = sync_to_async(next, thread_sensitive=False)
    try:
        while (chunk := await make_next(chunks, None)) is not None:
            yield chunk
    finally:
        chunks.close()


def stream_response(request, chunks: Iterator[bytes], *, filename: str, content_type: str) -> StreamingHttpResponse:
    """A body made as it is sent (an archive of many files): one chunk held at a time, under
    ASGI too. `chunks` must be a generator (it is closed when the client goes away)."""
    response = StreamingHttpResponse(_served(request, chunks), content_type=content_type)
    response["Content-Disposition"] = f"attachment; filename*=UTF-8''{quote(filename, safe='')}"
    return response
