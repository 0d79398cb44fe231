"""The ingest endpoint decides from the headers before it reads a body: no Content-Length,
a chunked body, an oversized length or a bad token are answered without reading a byte, and
a body is never read past its declared length. Both entry points: the bare ASGI app (what
the web process serves) and the Django view (the test client, WSGI)."""

import io
import json
import time

import pytest
from asgiref.sync import async_to_sync
from django.test import Client

from telemetry.asgi_ingest import ingest_app
from telemetry.models import GpuSampleRaw, NodeToken
from telemetry.views import MAX_BODY_BYTES

CHUNK = 64 * 1024


class CountingReceive:
    """An ASGI receive callable that counts its calls. By default it sends CHUNK-sized pieces
    that always claim more is coming: a reader without a bound would never stop."""

    def __init__(self, messages=None):
        self.calls = 0
        self.messages = list(messages) if messages is not None else None

    async def __call__(self):
        self.calls += 1
        if self.calls > 10_000:
            raise AssertionError("the app kept reading an endless body")
        if self.messages is None:
            return {"type": "http.request", "body": b"x" * CHUNK, "more_body": True}
        return self.messages.pop(0)


def call_app(headers, receive, method="POST"):
    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "method": method, "path": "/api/v1/telemetry/ingest", "headers": headers}
    async_to_sync(ingest_app)(scope, receive, send)
    if not sent:
        return None, None
    return sent[0]["status"], json.loads(sent[1]["body"])


def headers(length=None, token="gpn_unknown", **extra):
    result = [(b"authorization", f"Bearer {token}".encode()), (b"content-type", b"application/json")]
    if length is not None:
        result.append((b"content-length", str(length).encode()))
    result.extend((name.replace("_", "-").encode(), value.encode()) for name, value in extra.items())
    return result


@pytest.mark.parametrize(
    "request_headers, status",
    [
        (headers(), 411),  # no Content-Length at all
        (headers(transfer_encoding="chunked"), 411),
        (headers(length=100, transfer_encoding="chunked"), 411),  # HTTP says chunked wins: refused too
        (headers(length="abc"), 400),
        (headers(length="-1"), 400),
        (headers(length="12, 12"), 400),
        (headers(length=MAX_BODY_BYTES + 1), 413),
        (headers(length=10**15), 413),
    ],
)
def test_the_asgi_app_refuses_bad_lengths_from_the_headers_alone(request_headers, status):
    # No database: these answers come before the token check.
    receive = CountingReceive()
    started = time.monotonic()
    answer, payload = call_app(request_headers, receive)
    assert answer == status, payload
    assert receive.calls == 0
    assert time.monotonic() - started < 1  # answered at once, not after a petabyte


def test_two_content_length_headers_are_refused():
    receive = CountingReceive()
    answer, _ = call_app(headers(length=10) + [(b"content-length", b"10000")], receive)
    assert answer == 400 and receive.calls == 0


@pytest.mark.django_db(transaction=True)  # the app checks the token in a thread of its own
def test_a_bad_token_is_refused_before_the_body_is_read():
    NodeToken.issue("gpu-a100-01")
    receive = CountingReceive()
    answer, payload = call_app(headers(length=MAX_BODY_BYTES, token="gpn_forged"), receive)
    assert answer == 401 and "token" in payload["detail"]
    assert receive.calls == 0
    no_header = CountingReceive()
    answer, _ = call_app([(b"content-length", b"100")], no_header)
    assert answer == 401 and no_header.calls == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("declared", [100, CHUNK, 1024 * 1024])
def test_a_body_longer_than_declared_is_cut_off_one_message_after_its_length(declared):
    token = NodeToken.issue("gpu-a100-01")
    receive = CountingReceive()  # endless
    answer, payload = call_app(headers(length=declared, token=token), receive)
    assert answer == 400 and "longer than its Content-Length" in payload["detail"]
    assert receive.calls == declared // CHUNK + 1
    assert GpuSampleRaw.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_body_shorter_than_declared_or_a_disconnect_stores_nothing():
    token = NodeToken.issue("gpu-a100-01")
    short = CountingReceive([{"type": "http.request", "body": b'{"node": "gpu-a100-01"}', "more_body": False}])
    answer, payload = call_app(headers(length=1000, token=token), short)
    assert answer == 400 and "ended after 23 of its 1000" in payload["detail"]
    gone = CountingReceive([{"type": "http.request", "body": b"{", "more_body": True}, {"type": "http.disconnect"}])
    assert call_app(headers(length=1000, token=token), gone) == (None, None)
    assert GpuSampleRaw.objects.count() == 0


@pytest.mark.django_db(transaction=True)
def test_a_body_in_several_messages_of_exactly_its_length_is_stored():
    token = NodeToken.issue("gpu-a100-01")
    body = json.dumps({"node": "gpu-a100-01", "samples": []}).encode()
    halves = [
        {"type": "http.request", "body": body[:10], "more_body": True},
        {"type": "http.request", "body": body[10:], "more_body": False},
    ]
    receive = CountingReceive(halves)
    assert call_app(headers(length=len(body), token=token), receive)[0] == 202
    assert receive.calls == 2


def test_other_methods_are_405():
    receive = CountingReceive()
    assert call_app(headers(length=0), receive, method="GET")[0] == 405 and receive.calls == 0


class CountingStream(io.RawIOBase):
    """A WSGI input that counts reads and would hand out an endless body."""

    def __init__(self):
        self.reads = 0

    def readable(self):
        return True

    def readinto(self, buffer):
        self.reads += 1
        buffer[:] = b"x" * len(buffer)
        return len(buffer)


def post_view(token: str, **environ):
    stream = CountingStream()
    response = Client().generic(
        "POST",
        "/api/v1/telemetry/ingest",
        b"",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        **{"wsgi.input": stream},
        **environ,
    )
    return response, stream


@pytest.mark.django_db
@pytest.mark.parametrize(
    "environ, status",
    [
        ({}, 411),  # the test client sends no Content-Length for an empty body
        ({"CONTENT_LENGTH": str(10**15)}, 413),
        ({"CONTENT_LENGTH": "100", "HTTP_TRANSFER_ENCODING": "chunked"}, 411),
        ({"CONTENT_LENGTH": "100"}, 401),  # a valid length, a forged token
    ],
)
def test_the_django_view_answers_from_the_headers_without_reading(environ, status):
    NodeToken.issue("gpu-a100-01")
    response, stream = post_view("gpn_forged", **environ)
    assert response.status_code == status, response.content
    assert stream.reads == 0


@pytest.mark.django_db
def test_the_django_view_reads_no_more_than_the_declared_length():
    token = NodeToken.issue("gpu-a100-01")
    response, stream = post_view(token, CONTENT_LENGTH="10")
    # Ten bytes of "x" are read (and refused as not JSON); the endless rest never is.
    assert response.status_code == 400 and response.json()["detail"] == "The body is not JSON."
    assert stream.reads <= 2
