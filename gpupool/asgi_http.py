"""Django's synchronous request handling served over ASGI in one thread hop per request.

Django's own ASGI handler, with middleware that is not async-capable (WhiteNoise), hops
between the event loop and its thread three times a request and listens for disconnects
beside it; on the 2-core dev machine that doubled a small API read through Daphne (22 ms
against 12 ms; issue 13, bench/submit_and_live_status.py). Here the whole request, Django's
WSGI handler and its middleware, runs in the one thread that Django's ASGI handler would run
the view in (asgiref's thread-sensitive executor), as asgiref's WsgiToAsgi does, except that
the response is closed in that thread as soon as it is sent: close() is what sends Django's
request_finished (database connections tidied) and shuts a FileResponse's file, and left to
the garbage collector it ran on the event loop's thread and broke asgiref's executors."""

from asgiref.sync import sync_to_async
from asgiref.wsgi import WsgiToAsgi, WsgiToAsgiInstance


class _Instance(WsgiToAsgiInstance):
    @sync_to_async
    def run_wsgi_app(self, body):
        try:
            environ = self.build_environ(self.scope, body)
        except ValueError:  # too many duplicate headers
            self.sync_send(
                {"type": "http.response.start", "status": 400, "headers": [(b"content-type", b"text/plain")]}
            )
            self.sync_send({"type": "http.response.body", "body": b"Bad Request: too many duplicate headers"})
            return
        response = self.wsgi_application(environ, self.start_response)
        try:
            for chunk in response:
                if not self.response_started:
                    self.response_started = True
                    self.sync_send(self.response_start)
                if chunk:
                    self.sync_send({"type": "http.response.body", "body": chunk, "more_body": True})
        finally:
            close = getattr(response, "close", None)
            if close is not None:
                close()
        if not self.response_started:
            self.response_started = True
            self.sync_send(self.response_start)
        self.sync_send({"type": "http.response.body", "body": b""})


class DjangoHttp(WsgiToAsgi):
    """ASGI application for Django's HTTP requests: `DjangoHttp(get_wsgi_application())`."""

    async def __call__(self, scope, receive, send):
        await _Instance(self.wsgi_application, self.duplicate_header_limit)(scope, receive, send)
