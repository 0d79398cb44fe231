"""Request bodies refused above a size before the portal holds them.

The outermost ASGI layer (gpupool/asgi.py). A body that declares a Content-Length over the limit
is answered 413 at once, not one byte of it read; a body without one (chunked) is counted as the
application reads it, and the request fails with 413 at the first piece past the limit (or, if
the application had already answered, the connection is closed). The web server
(gpupool/serve.py) stops reading the socket while the application has not taken the last
piece, so a body is never in memory beyond that piece (64 KiB) plus whatever the handler keeps.

The limit depends on the host: the portal's (MAX_REQUEST_BODY_BYTES: a dataset upload's 8 MiB
chunk and the telemetry ingest's 8 MiB batch are the largest) or a session's
(SESSION_MAX_BODY_BYTES: JupyterLab sends a file under 15 MB whole, base64 in JSON).
"""

from __future__ import annotations

from foundation.asgi_json import request_header


class BodyTooLarge(Exception):
    pass


async def _plain_answer(send, status: int, text: str) -> None:
    """A short text answer that closes the connection: the unread rest of the body is never
    read, so the connection cannot carry another request."""
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def refuse(send, limit: int) -> None:
    mib = limit / (1024 * 1024)
    await _plain_answer(send, 413, f"Request body too large: at most {mib:g} MiB is accepted here.\n")


class BodyLimit:
    """`BodyLimit(app, limit_for)`: `limit_for(scope)` gives the most bytes a request may send."""

    def __init__(self, app, limit_for):
        self.app = app
        self.limit_for = limit_for

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        limit = self.limit_for(scope)
        declared = request_header(scope, b"content-length")
        if declared is not None:
            if not declared.isdigit():
                return await _plain_answer(send, 400, "Bad Request: Content-Length is not a number.\n")
            if int(declared) > limit:
                return await refuse(send, limit)
        received = 0
        started = False

        async def counted_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise BodyTooLarge
            return message

        async def watched_send(message):
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, counted_receive, watched_send)
        except BodyTooLarge:
            if not started:
                await refuse(send, limit)
            # Otherwise the answer is under way: returning unfinished makes the server close it.
