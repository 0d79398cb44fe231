"""Django's pages and API through the ASGI application the web process serves (gpupool/asgi.py): the
whole synchronous request in one thread, its response closed once sent."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.core.signals import request_finished

from accounts.models import ApiToken

pytestmark = pytest.mark.django_db(transaction=True)


def _request(method, path, headers=(), body=b""):
    from gpupool.asgi import application

    communicator = HttpCommunicator(application, method, path, body=body, headers=list(headers))

    async def exchange():
        await communicator.send_input({"type": "http.request", "body": body})
        start = await communicator.receive_output(10)
        received, more = b"", True
        while more:
            message = await communicator.receive_output(10)
            # ASGI: "body" and "more_body" may be left out (b"" and False).
            received += message.get("body", b"")
            more = message.get("more_body", False)
        await communicator.wait(10)
        return {"status": start["status"], "headers": start.get("headers", []), "body": received}

    return async_to_sync(exchange)()


def test_an_api_call_through_asgi_answers_and_finishes_the_request(alice):
    _token, key = ApiToken.issue(alice, "asgi")
    finished = []

    def on_finished(**kwargs):
        finished.append(kwargs)

    request_finished.connect(on_finished)
    try:
        response = _request("GET", "/api/v1/jobs/", headers=[(b"authorization", f"Bearer {key}".encode())])
    finally:
        request_finished.disconnect(on_finished)
    assert response["status"] == 200
    assert b'"results":[]' in response["body"].replace(b" ", b"")
    assert finished, "the response was never closed: Django did not finish the request"


def test_a_page_and_a_refusal_keep_their_status_and_headers():
    login = _request("GET", "/accounts/login/")
    assert login["status"] == 200
    assert any(name == b"content-type" and value.startswith(b"text/html") for name, value in login["headers"])
    refused = _request("GET", "/api/v1/jobs/")
    assert refused["status"] in {401, 403}


def test_a_post_body_reaches_the_view(alice):
    _token, key = ApiToken.issue(alice, "asgi")
    response = _request(
        "POST",
        "/api/v1/jobs/",
        headers=[(b"authorization", f"Bearer {key}".encode()), (b"content-type", b"application/json")],
        body=b'{"image": "", "command": ""}',
    )
    # Validation read the body: it names the fields it found wanting.
    assert response["status"] == 400
    assert b"image" in response["body"]


def test_many_requests_on_one_keep_alive_connection_through_daphne(alice):
    """The web process, one HTTP connection, pages, static files and the API in turn: every answer is
    the view's. (With responses sent from the worker thread, a connection's later requests
    inherited a finished call's executor and got 500s after a few.)"""
    import requests

    from testing.servers import portal_stack

    _token, key = ApiToken.issue(alice, "keep-alive")
    with portal_stack() as base_url, requests.Session() as session:
        statuses = []
        for _ in range(15):
            statuses.append(session.get(f"{base_url}/accounts/login/").status_code)
            statuses.append(session.get(f"{base_url}/static/css/portal.css").status_code)
            statuses.append(
                session.get(f"{base_url}/api/v1/jobs/", headers={"Authorization": f"Bearer {key}"}).status_code
            )
    assert statuses == [200, 200, 200] * 15


def _wsgi_app_with_a_gate(gate, entered):
    """A WSGI app whose /slow requests wait on `gate` (a hanging slurmrestd call, a hash)."""

    def app(environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            entered.release()
            gate.wait(10)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [environ["PATH_INFO"].encode()]

    return app


async def _get(app, path):
    communicator = HttpCommunicator(app, "GET", path)
    response = await communicator.get_response(timeout=10)
    return response["body"].decode()


def test_a_slow_request_holds_its_own_thread_and_no_other_request():
    import asyncio
    import threading

    from gpupool.asgi_http import DjangoHttp

    gate, entered = threading.Event(), threading.Semaphore(0)
    app = DjangoHttp(_wsgi_app_with_a_gate(gate, entered), threads=4)

    async def scenario():
        slow = [asyncio.ensure_future(_get(app, "/slow")) for _ in range(3)]
        for _ in range(3):  # all three are inside the view at once, each in its own thread
            await asyncio.get_running_loop().run_in_executor(None, entered.acquire, True, 5)
        fast = await asyncio.wait_for(_get(app, "/fast"), 5)
        assert not any(task.done() for task in slow)
        gate.set()
        return fast, await asyncio.gather(*slow)

    fast, slow = async_to_sync(scenario)()
    assert fast == "/fast" and slow == ["/slow"] * 3


def test_requests_beyond_the_thread_bound_wait_for_a_free_thread():
    import asyncio
    import threading

    from gpupool.asgi_http import DjangoHttp

    gate, entered = threading.Event(), threading.Semaphore(0)
    app = DjangoHttp(_wsgi_app_with_a_gate(gate, entered), threads=2)

    async def scenario():
        slow = [asyncio.ensure_future(_get(app, "/slow")) for _ in range(2)]
        for _ in range(2):
            await asyncio.get_running_loop().run_in_executor(None, entered.acquire, True, 5)
        waiting = asyncio.ensure_future(_get(app, "/fast"))
        await asyncio.sleep(0.3)
        assert not waiting.done(), "a third request ran beside two busy threads of a bound of two"
        gate.set()
        return await asyncio.wait_for(waiting, 5), await asyncio.gather(*slow)

    fast, slow = async_to_sync(scenario)()
    assert fast == "/fast" and slow == ["/slow"] * 2
    assert app.lanes._created == 2


def _where_the_body_is(environ, start_response):
    body = environ["wsgi.input"]
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"file" if body._rolled else b"memory", str(len(body.read())).encode()]


def test_a_bounded_body_stays_in_memory_while_a_slot_is_free_and_others_spool():

    from gpupool.asgi_http import BODY_IN_MEMORY_MAX, MEMORY_BODIES, DjangoHttp

    app = DjangoHttp(_where_the_body_is, threads=2)

    async def post(size: int) -> str:
        headers = [(b"content-length", str(size).encode())]
        communicator = HttpCommunicator(app, "PATCH", "/upload", body=b"x" * size, headers=headers)
        return (await communicator.get_response(timeout=10))["body"].decode()

    assert async_to_sync(post)(8 * 1024 * 1024) == f"memory{8 * 1024 * 1024}"  # an upload chunk
    assert async_to_sync(post)(BODY_IN_MEMORY_MAX + 1) == f"file{BODY_IN_MEMORY_MAX + 1}"
    for _ in range(MEMORY_BODIES):  # every slot held by requests in flight
        assert app._memory_slots.acquire(blocking=False)
    assert async_to_sync(post)(1024 * 1024) == f"file{1024 * 1024}"
    for _ in range(MEMORY_BODIES):
        app._memory_slots.release()
    assert async_to_sync(post)(1024 * 1024) == f"memory{1024 * 1024}"
