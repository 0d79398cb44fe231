"""Django's synchronous request handling served over ASGI in one thread hop per request.

Django's own ASGI handler, with middleware that is not async-capable (WhiteNoise), hops
between the event loop and its thread three times a request and listens for disconnects
beside it; on the 2-core dev machine that doubled a small API read through Daphne (22 ms
against 10 ms; issue 13, bench/submit_and_live_status.py). Here Django's WSGI handler and its
middleware run whole in the thread Django's ASGI handler would run the view in (asgiref's
thread-sensitive executor); a plain response comes back complete and closed from that one
hop, a streaming one (a log download) is read a chunk a hop. Everything is sent from the event
loop: asgiref's WsgiToAsgi sends from the worker thread through AsyncToSync, and a keep-alive
connection's next request then inherited that finished call's executor and failed
("CurrentThreadExecutor already quit or is broken")."""

from tempfile import SpooledTemporaryFile

from asgiref.sync import sync_to_async
from asgiref.wsgi import WsgiToAsgiInstance

_END = object()


class DjangoHttp:
    """ASGI application for Django's HTTP requests: `DjangoHttp(get_wsgi_application())`."""

    def __init__(self, wsgi_application):
        self.wsgi_application = wsgi_application

    async def __call__(self, scope, receive, send):
        with SpooledTemporaryFile(max_size=65536) as body:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                body.write(message.get("body", b""))
                if not message.get("more_body"):
                    break
            body.seek(0)
            outcome = await sync_to_async(self._respond)(scope, body)
        start, content, response, chunks = outcome
        await send(start)
        if response is None:
            await send({"type": "http.response.body", "body": content})
            return
        try:  # streaming: a chunk a hop, closed in the thread whatever happens to the client
            while (chunk := await sync_to_async(next)(chunks, _END)) is not _END:
                if chunk:
                    await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await sync_to_async(response.close)()

    def _respond(self, scope, body):
        """In the thread: the response's start message, and its whole content (closed) or,
        for a streaming response, the response and its iterator."""
        converter = WsgiToAsgiInstance(self.wsgi_application)
        converter.scope = scope
        try:
            environ = converter.build_environ(scope, body)
        except ValueError:  # too many duplicate headers
            start = {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"text/plain")]}
            return start, b"Bad Request: too many duplicate headers", None, None
        response = self.wsgi_application(environ, converter.start_response)
        if getattr(response, "streaming", False):
            return converter.response_start, b"", response, iter(response)
        try:
            content = b"".join(response)
        finally:
            response.close()  # Django's request_finished: database connections tidied
        return converter.response_start, content, None, None
