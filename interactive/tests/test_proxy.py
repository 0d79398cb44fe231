"""The proxy in front of a session: who gets through, what reaches the server, what comes back.
In-process ASGI against the application the web process serves (gpupool/asgi.py), on the test database."""

import json
from contextlib import contextmanager
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator, WebsocketCommunicator

from accounts.models import ApiToken
from gpupool.asgi import application
from interactive import origins
from interactive.models import InteractiveSession
from interactive.tests.upstream import session_on as _session
from interactive.tests.upstream import upstream_server
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db(transaction=True)


@contextmanager
def patch_decide():
    """Records each host key the proxy decides from the database."""
    from interactive import proxy

    decided, real = [], proxy._decide_in_database

    async def recording(host_key, **kwargs):
        decided.append(host_key)
        return await real(host_key, **kwargs)

    proxy._decide_in_database = recording
    try:
        yield decided
    finally:
        proxy._decide_in_database = real


def _host(session) -> bytes:
    return origins.session_host(session.host_key).encode()


def _cookie_for(session, user) -> bytes:
    return f"{origins.SESSION_COOKIE}={origins.cookie_value(session.pk, user)}".encode()


def _get(session, path="/api/echo", *, headers=(), method="GET", body=b""):
    async def go():
        communicator = HttpCommunicator(
            application, method, path, body=body, headers=[(b"host", _host(session)), *headers]
        )
        return await communicator.get_response(timeout=10)

    return async_to_sync(go)()


def _socket(session, user, path: str) -> WebsocketCommunicator:
    """A browser's WebSocket to `path` of the session's origin, with `user`'s cookie; the stand-in
    server insists on a subprotocol (a terminal's or VS Code's socket needs none, and none is needed here)."""
    return WebsocketCommunicator(
        application,
        path,
        headers=[
            (b"host", _host(session)),
            (b"cookie", _cookie_for(session, user)),
            (b"origin", f"http://{origins.session_host(session.host_key)}".encode()),
        ],
        subprotocols=["v1.kernel.websocket.jupyter.org"],
    )


def _headers(response) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for name, value in response["headers"]:
        found.setdefault(name.decode().lower(), []).append(value.decode())
    return found


def test_the_owner_reaches_the_server_with_the_sessions_token_and_nothing_of_the_portals(alice):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        cookie = _cookie_for(session, alice) + b"; sessionid=portal-secret; csrftoken=c; theme=dark"

        def post(origin: bytes):
            return _get(
                session,
                "/api/echo?x=1",
                method="POST",
                body=b'{"a": 1}',
                headers=[
                    (b"cookie", cookie),
                    (b"origin", origin),
                    (b"content-type", b"application/json"),
                    (b"content-length", b"8"),
                ],
            )

        # From another origin (another session's page is the same site): refused here.
        for elsewhere in (b"http://evil.example", f"http://{origins.session_host('f' * 16)}".encode()):
            refused = post(elsewhere)
            assert refused["status"] == 403 and b"did not come from the session" in refused["body"]
        response = post(b"http://" + _host(session))
        assert response["status"] == 200
        seen = json.loads(response["body"])
        assert seen["method"] == "POST" and seen["path"] == "/api/echo?x=1" and seen["body"] == '{"a": 1}'
        headers = {name.lower(): value for name, value in seen["headers"].items()}
        assert headers["authorization"] == f"token {session.token}"
        assert headers["cookie"] == "theme=dark"  # the portal's and this origin's own cookies stay here
        assert "origin" not in headers
        assert headers["host"] == f"127.0.0.1:{http_port}"
        # The server may set its own cookies on this origin, never the proxy's.
        assert _headers(response)["set-cookie"] == ["_xsrf=abc; Path=/"]
        assert session.token.encode() not in response["body"].replace(f"token {session.token}".encode(), b"")


def test_a_notebook_page_gets_the_notice_script(alice):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        response = _get(session, "/lab", headers=[(b"cookie", _cookie_for(session, alice))])
        assert response["status"] == 200
        assert b'<script src="/_gpupool/notice.js" defer></script></head>' in response["body"]
        assert b'{"token": ""}' in response["body"]  # JupyterLab's copy of the server's token, taken out
        assert _headers(response)["content-length"] == [str(len(response["body"]))]
        big = _get(session, "/lab/big", headers=[(b"cookie", _cookie_for(session, alice))])
        assert big["status"] == 200 and len(big["body"]) > 5 * 1024 * 1024
        assert session.token.encode() not in big["body"]
        script = _get(session, "/_gpupool/notice.js", headers=[(b"cookie", _cookie_for(session, alice))])
        assert script["status"] == 200 and b"/_gpupool/status" in script["body"]
        status = json.loads(
            _get(session, "/_gpupool/status", headers=[(b"cookie", _cookie_for(session, alice))])["body"]
        )
        assert status["state"] == "ready" and "url" not in status and session.token not in json.dumps(status)


def test_everybody_else_gets_the_same_404_and_no_cookie_means_the_portals_sign_in(alice, bob, settings):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        other = _session(alice, port=http_port)
        _token, bob_key = ApiToken.issue(bob, "t")
        refusals = [
            [(b"cookie", _cookie_for(session, bob))],  # bob's own (valid) cookie for alice's session
            [(b"authorization", f"Bearer {bob_key}".encode())],
            [(b"authorization", b"Bearer gpt_made_up")],
            [(b"cookie", f"{origins.SESSION_COOKIE}=tampered".encode())],
        ]
        for headers in refusals:
            response = _get(session, headers=headers)
            assert response["status"] in (404, 302), headers
            assert b"authorization" not in response["body"].lower()
        assert _get(session, headers=refusals[0])["status"] == 404
        assert _get(session, headers=refusals[1])["status"] == 404
        # Another session's cookie is for that session's origin only: here it is no cookie at all.
        moved = _get(session, "/lab?a=b", headers=[(b"cookie", _cookie_for(other, alice))])
        assert moved["status"] == 302
        location = _headers(moved)["location"][0]
        assert location.startswith(f"{settings.SITE_URL}/sessions/open/{session.host_key}/")
        assert parse_qs(urlsplit(location).query)["next"] == ["/lab?a=b"]
        # A name that is no session's.
        nobody = InteractiveSession(host_key="0" * 16)
        assert _get(nobody, headers=[(b"authorization", f"Bearer {bob_key}".encode())])["status"] == 404


def test_a_ticket_opens_the_session_once_and_only_on_its_own_origin(alice, bob):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        other = _session(alice, port=http_port)
        url = urlsplit(origins.open_url(session, alice, "/lab/tree"))
        assert url.netloc.startswith(origins.session_host(session.host_key))
        query = url.query.encode()

        async def open_at(target, query_string):
            communicator = HttpCommunicator(
                application, "GET", "/_gpupool/open", headers=[(b"host", _host(target))], body=b""
            )
            communicator.scope["query_string"] = query_string
            return await communicator.get_response(timeout=10)

        # Presented at another session's origin: refused, and that uses it up.
        stray = urlsplit(origins.open_url(session, alice)).query.encode()
        assert async_to_sync(open_at)(other, stray)["status"] == 404
        assert async_to_sync(open_at)(session, stray)["status"] == 404
        assert async_to_sync(open_at)(session, b"ticket=made-up")["status"] == 404
        first = async_to_sync(open_at)(session, query)
        assert first["status"] == 302
        headers = _headers(first)
        assert headers["location"] == ["/lab/tree"]
        cookie = headers["set-cookie"][0]
        assert cookie.startswith(f"{origins.SESSION_COOKIE}=") and "HttpOnly" in cookie and "SameSite=Lax" in cookie
        assert async_to_sync(open_at)(session, query)["status"] == 404  # once
        fresh = urlsplit(origins.open_url(other, alice)).query.encode()
        assert async_to_sync(open_at)(session, fresh)["status"] == 404  # another session's ticket
        # The cookie it set gets through.
        value = cookie.split(";")[0].encode()
        assert _get(session, headers=[(b"cookie", value)])["status"] == 200


def test_a_session_not_ready_or_stopped_answers_with_a_page_saying_so(alice):
    with upstream_server() as (http_port, _ws, _server):
        queued = _session(alice, port=http_port, state=JobState.PENDING, ready=False)
        response = _get(queued, headers=[(b"cookie", _cookie_for(queued, alice))])
        assert response["status"] == 503 and b"not ready yet" in response["body"]
        stopped = _session(alice, port=http_port, state=JobState.CANCELLED)
        InteractiveSession.objects.filter(pk=stopped.pk).update(stop_reason="idle")
        response = _get(stopped, headers=[(b"cookie", _cookie_for(stopped, alice))])
        assert response["status"] == 410 and b"stopped after being idle" in response["body"]
    # The server gone while the session is running: a page, not a proxy error.
    gone = _session(alice, port=1)
    response = _get(gone, headers=[(b"cookie", _cookie_for(gone, alice))])
    assert response["status"] == 502 and b"not answering" in response["body"]


def test_websockets_are_bridged_with_the_servers_subprotocol_and_refused_to_others(alice, bob):
    with upstream_server() as (_http, ws_port, _server):
        session = _session(alice, port=ws_port)

        async def scenario(cookie_user):
            communicator = _socket(session, cookie_user, "/api/kernels/k1/channels?session_id=s")
            connected, subprotocol = await communicator.connect(timeout=10)
            if not connected:
                return connected, None, None, None
            hello = json.loads(await communicator.receive_from(timeout=10))
            await communicator.send_to(text_data="ping")
            text = await communicator.receive_from(timeout=10)
            await communicator.send_to(bytes_data=b"\x00\x01")
            binary = await communicator.receive_output(timeout=10)
            await communicator.disconnect()
            return connected, subprotocol, hello, (text, binary.get("bytes"))

        connected, subprotocol, hello, echoed = async_to_sync(scenario)(alice)
        assert connected and subprotocol == "v1.kernel.websocket.jupyter.org"
        sent = {name.lower(): value for name, value in hello["headers"].items()}
        assert sent["authorization"] == f"token {session.token}"
        assert "cookie" not in sent
        assert sent["origin"] == f"http://127.0.0.1:{ws_port}"
        assert echoed == ("ping", b"\x00\x01")
        assert async_to_sync(scenario)(bob)[0] is False
        # A page of another origin opening the kernel's socket with alice's cookie: refused.

        async def from_elsewhere():
            communicator = WebsocketCommunicator(
                application,
                "/api/kernels/k1/channels",
                headers=[
                    (b"host", _host(session)),
                    (b"cookie", _cookie_for(session, alice)),
                    (b"origin", b"http://evil.example"),
                ],
            )
            connected, _ = await communicator.connect(timeout=10)
            return connected

        assert async_to_sync(from_elsewhere)() is False


def test_a_cookie_ends_with_a_password_change_once_the_decision_is_old(alice, settings):
    import time

    settings.SESSION_PROXY_DECISION_SECONDS = 0.5
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        cookie = _cookie_for(session, alice)
        assert _get(session, headers=[(b"cookie", cookie)])["status"] == 200
        alice.set_password("a-new-password-entirely")
        alice.save()
        # The proxy reuses its decision for SESSION_PROXY_DECISION_SECONDS, no longer.
        assert _get(session, headers=[(b"cookie", cookie)])["status"] == 200
        time.sleep(0.6)
        assert _get(session, headers=[(b"cookie", cookie)])["status"] == 302


def test_a_flood_of_one_user_is_decided_once_and_paced(alice, settings):
    import asyncio
    import time

    settings.SESSION_PROXY_BURST = 20
    settings.SESSION_PROXY_REQUESTS_PER_SECOND = 1
    settings.SESSION_PROXY_HOLD_SECONDS = 0
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        cookie = _cookie_for(session, alice)

        async def flood(count: int):
            async def one():
                communicator = HttpCommunicator(
                    application, "GET", "/api/echo", headers=[(b"host", _host(session)), (b"cookie", cookie)]
                )
                return (await communicator.get_response(timeout=10))["status"]

            return await asyncio.gather(*(one() for _ in range(count)))

        with patch_decide() as decided:
            statuses = async_to_sync(flood)(30)
        # 30 at once: one decision from the database, 20 through (the burst), the rest 429.
        assert decided == [session.host_key]
        assert sorted(statuses) == [200] * 20 + [429] * 10
        # Held instead of refused: past the burst, each waits for its turn at the pace.
        settings.SESSION_PROXY_HOLD_SECONDS = 5
        settings.SESSION_PROXY_REQUESTS_PER_SECOND = 20
        time.sleep(1.1)  # 20 tokens back
        started = time.monotonic()
        statuses = async_to_sync(flood)(26)
        assert statuses == [200] * 26
        assert time.monotonic() - started >= 0.25  # six past the burst of 20, at 20 a second
        # A caller not yet known has the host name's budget, not alice's.
        assert _get(session, headers=[(b"cookie", b"")])["status"] == 302


def test_host_names_other_than_a_sessions_stay_with_the_portal(settings):
    assert origins.host_key_of("s-0123456789abcdef.sessions.localhost:8000") == "0123456789abcdef"
    assert origins.host_key_of("S-0123456789ABCDEF.Sessions.Localhost") == "0123456789abcdef"
    for host in (
        "127.0.0.1:8000",
        "s-0123456789abcdef.evil.example",
        "x.s-0123456789abcdef.sessions.localhost",
        "s-0123.sessions.localhost",
        "sessions.localhost",
        "[::1]:8000",
    ):
        assert origins.host_key_of(host) is None, host
    assert origins.safe_next("//evil.example/") == "/"
    assert origins.safe_next("https://evil.example/") == "/"
    assert origins.safe_next("/lab/tree/a.ipynb") == "/lab/tree/a.ipynb"
    # A browser drops a tab or a newline from a URL: "/<TAB>/evil.example" would be //evil.example.
    for sneaky in ("/\t/evil.example/", "/\n/evil.example", "/\r\n/evil.example", "/ /evil.example", "/\x7f/x"):
        assert origins.safe_next(sneaky) == "/", repr(sneaky)
    assert timedelta(seconds=origins.TICKET_SECONDS) < timedelta(minutes=5)


def test_with_redis_down_a_ticket_is_not_taken_and_the_page_says_so(alice, settings):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        query = urlsplit(origins.open_url(session, alice)).query.encode()
        working = settings.REDIS_URL
        settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there

        async def open_it():
            communicator = HttpCommunicator(application, "GET", "/_gpupool/open", headers=[(b"host", _host(session))])
            communicator.scope["query_string"] = query
            return await communicator.get_response(timeout=10)

        down = async_to_sync(open_it)()
        assert down["status"] == 503 and b"Redis is not answering" in down["body"]
        assert "set-cookie" not in _headers(down)
        # Back: the same ticket opens the session (it was never taken).
        settings.REDIS_URL = working
        assert async_to_sync(open_it)()["status"] == 302


def test_a_session_stopped_since_a_reused_decision_says_so_not_that_its_server_is_down(alice, settings):
    settings.SESSION_PROXY_DECISION_SECONDS = 60
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port)
        cookie = _cookie_for(session, alice)
        assert _get(session, headers=[(b"cookie", cookie)])["status"] == 200
    # The server is gone with its job: the reused decision still says "proxy", the server does
    # not answer, and the decision made again says what happened.
    Job.objects.filter(pk=session.job_id).update(state=JobState.CANCELLED)
    answer = _get(session, headers=[(b"cookie", cookie)])
    assert answer["status"] == 410 and b"stopped" in answer["body"]
    # A server that does not answer while its session is still ready: the 502 page.
    settings.SESSION_PROXY_DECISION_SECONDS = 0
    Job.objects.filter(pk=session.job_id).update(state=JobState.RUNNING)
    answer = _get(session, headers=[(b"cookie", cookie)])
    assert answer["status"] == 502 and b"not answering" in answer["body"]


def test_a_terminals_keystrokes_and_output_are_noted_as_they_pass_and_a_kernels_are_not(alice):
    with upstream_server() as (_http, ws_port, _server):
        session = _session(alice, port=ws_port)

        async def type_in(path, text):
            communicator = _socket(session, alice, path)
            connected, _ = await communicator.connect(timeout=10)
            assert connected
            await communicator.receive_from(timeout=10)  # the echo server's hello
            await communicator.send_to(text_data=text)
            echoed = await communicator.receive_from(timeout=10)  # the echo: a terminal's output
            await communicator.disconnect()
            return echoed

        assert async_to_sync(type_in)("/api/kernels/k1/channels", '["stdin", "ls\\r"]') == '["stdin", "ls\\r"]'
        session.refresh_from_db()
        assert session.terminal_input_at is None  # a kernel's socket is not a terminal's
        async_to_sync(type_in)("/terminals/websocket/1", '["stdin", "ls\\r"]')
        session.refresh_from_db()
        assert session.terminal_input_at is not None and session.terminal_output_at is None
        # The echo server answers with the same message; a shell's output is ["stdout", ...].
        async_to_sync(type_in)("/terminals/websocket/1", '["stdout", "total 0\\r\\n"]')
        session.refresh_from_db()
        assert session.terminal_output_at is not None


def test_a_page_opened_is_use_and_a_fetch_is_not(alice):
    with upstream_server() as (http_port, _ws, _server):
        session = _session(alice, port=http_port, kind="tensorboard")
        cookie = (b"cookie", _cookie_for(session, alice))
        # TensorBoard's own reloads: fetches, every 30 s while the tab is open.
        assert _get(session, "/data/runs", headers=[cookie, (b"sec-fetch-mode", b"cors")])["status"] == 200
        session.refresh_from_db()
        assert session.browser_input_at is None
        assert _get(session, "/", headers=[cookie, (b"sec-fetch-mode", b"navigate")])["status"] == 200
        session.refresh_from_db()
        assert session.browser_input_at is not None


VSCODE_SOCKET = "/stable-abc?reconnectionToken=1&reconnection=false&skipWebSocketFrames=false"


def _vscode_message(kind: int, body: bytes = b"") -> bytes:
    """VS Code's remote protocol: type, id, ack (4 bytes each after the first), length, body."""
    return bytes([kind]) + (7).to_bytes(4, "big") + (3).to_bytes(4, "big") + len(body).to_bytes(4, "big") + body


def test_vs_codes_requests_from_the_browser_are_use_and_its_heartbeat_is_not(alice):
    with upstream_server() as (_http, ws_port, _server):
        session = _session(alice, port=ws_port, kind="vscode")

        async def send(messages):
            communicator = _socket(
                session, alice, "/stable-abc?reconnectionToken=1&reconnection=false&skipWebSocketFrames=false"
            )
            connected, _ = await communicator.connect(timeout=10)
            assert connected
            await communicator.receive_from(timeout=10)  # the echo server's hello
            for message in messages:
                await communicator.send_to(bytes_data=message)
                assert await communicator.receive_from(timeout=10) == message  # relayed as it is
            await communicator.disconnect()

        async_to_sync(send)([_vscode_message(9), _vscode_message(3), _vscode_message(9)])
        session.refresh_from_db()
        assert session.browser_input_at is None  # keep-alives and acks: a tab left open
        async_to_sync(send)([_vscode_message(1, b'{"type":"request","command":"save"}')])
        session.refresh_from_db()
        assert session.browser_input_at is not None


def test_a_jupyterlab_sockets_binary_messages_are_not_vs_codes(alice):
    with upstream_server() as (_http, ws_port, _server):
        session = _session(alice, port=ws_port, kind="jupyterlab")

        async def send():
            communicator = _socket(session, alice, "/api/kernels/k1/channels")
            connected, _ = await communicator.connect(timeout=10)
            assert connected
            await communicator.receive_from(timeout=10)
            await communicator.send_to(bytes_data=_vscode_message(1, b"x" * 20))
            await communicator.receive_from(timeout=10)
            await communicator.disconnect()

        async_to_sync(send)()
        session.refresh_from_db()
        assert session.browser_input_at is None
