"""The portal as the only door to a session: an ASGI application for the sessions' host names
(interactive/origins.py), in front of Django in gpupool/asgi.py.

HTTP goes through one shared httpx.AsyncClient, streamed both ways (a large notebook upload or
download is never held whole); WebSockets (kernels) are bridged to the server with the
`websockets` client, message for message, with the subprotocol the server chose. Every request
is decided from the database (interactive/access.py; simultaneous decisions shared and each
user paced: interactive/proxy_decisions.py) and forwarded to the address and port the
session's row holds, with the session's token added; the browser's cookies for this origin and
its Authorization header stay here. None of it runs on Django's request threads: a slow notebook
holds nothing another request needs.

Paths under /_gpupool/ are the proxy's own: the ticket exchange, the notice script the notebook
page gets (idle warnings) and its status.
"""

from __future__ import annotations

import asyncio
import json
import logging
from http.cookies import SimpleCookie
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from django.conf import settings
from django.utils.html import escape
from websockets.asyncio.client import connect as websocket_connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from foundation.async_db import PROXY_DB
from interactive import access, origins
from interactive.browser_activity import VsCodeWatch, is_navigation, note_navigation
from interactive.events import session_payload
from interactive.models import InteractiveSession
from interactive.proxy_decisions import DecisionCache, RequestBudget
from interactive.terminal_activity import SocketWatch, TerminalWatch, is_terminal_socket

log = logging.getLogger(__name__)

# Never forwarded either way (RFC 9110 7.6.1), plus what this proxy sets itself.
HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-authenticate",
    b"proxy-authorization",
    b"te",
    b"trailer",
    b"transfer-encoding",
    b"upgrade",
    b"host",
    b"authorization",
    b"cookie",
    b"origin",
    b"referer",
    b"content-length",
}
# The portal's own cookies, were a browser ever to send them here, and this origin's ticket cookie.
STRIPPED_COOKIES = {origins.SESSION_COOKIE, "sessionid", "csrftoken", "messages"}
NOTICE_SCRIPT = Path(settings.BASE_DIR) / "static" / "interactive" / "notice.js"
NOTICE_TAG = b'<script src="/_gpupool/notice.js" defer></script>'
# A notebook page is a few KiB; one larger than this is passed through without the notice.
INJECT_MAX_BYTES = 4 * 1024 * 1024
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
TIMEOUT = httpx.Timeout(connect=5.0, read=300.0, write=60.0, pool=10.0)

_clients: dict[int, httpx.AsyncClient] = {}


def _client() -> httpx.AsyncClient:
    # One per event loop (a web process has one; tests may run several).
    loop_id = id(asyncio.get_running_loop())
    client = _clients.get(loop_id)
    if client is None:
        client = _clients[loop_id] = httpx.AsyncClient(timeout=TIMEOUT, follow_redirects=False, trust_env=False)
    return client


def _header(scope, name: bytes) -> str | None:
    values = [value.decode("latin-1") for key, value in scope.get("headers", []) if key.lower() == name]
    return ",".join(values) if values else None


def _cookies(scope) -> dict[str, str]:
    jar = SimpleCookie()
    try:
        jar.load(_header(scope, b"cookie") or "")
    except Exception:
        return {}
    return {name: morsel.value for name, morsel in jar.items()}


def _forwarded_cookie_header(scope) -> str | None:
    kept = [f"{name}={value}" for name, value in _cookies(scope).items() if name not in STRIPPED_COOKIES]
    return "; ".join(kept) if kept else None


def _upstream_headers(scope, decision: access.Decision) -> list[tuple[str, str]]:
    headers = [
        (key.decode("latin-1"), value.decode("latin-1"))
        for key, value in scope.get("headers", [])
        if key.lower() not in HOP_BY_HOP and not key.lower().startswith(b"sec-websocket")
    ]
    length = _header(scope, b"content-length")
    if length is not None and length.isdigit() and scope["type"] == "http":
        headers.append(("Content-Length", length))  # the body streams through with its length
    cookie = _forwarded_cookie_header(scope)
    if cookie:
        headers.append(("Cookie", cookie))
    headers.append(("Authorization", f"token {decision.token}"))
    return headers


def _upstream_base(decision: access.Decision) -> str:
    host = f"[{decision.address}]" if ":" in decision.address else decision.address
    return f"{host}:{decision.port}"


def _path_and_query(scope) -> str:
    path = scope.get("raw_path") or scope["path"].encode()
    path = path.decode("latin-1") if isinstance(path, bytes) else path
    query = scope.get("query_string", b"").decode("latin-1")
    return f"{path}?{query}" if query else path


async def _decide(scope, *, fresh: bool = False) -> tuple[str, access.Decision]:
    """The decision for this request: reused when one was made a moment ago, unless `fresh`."""
    host_key = origins.host_key_of(_header(scope, b"host") or "")
    if host_key is None:
        return "", access.NOT_FOUND
    # Only a Bearer header is the portal's API token; JupyterLab's own ("token ...") is not ours.
    authorization = _header(scope, b"authorization") or ""
    bearer = authorization if authorization[:7].lower() == "bearer " else None
    cookie = _cookies(scope).get(origins.SESSION_COOKIE)
    if fresh:
        _decisions.forget((host_key, cookie, bearer))
    decision = await _decisions.get(
        (host_key, cookie, bearer), lambda: _decide_in_database(host_key, cookie=cookie, bearer=bearer)
    )
    return host_key, decision


# What _forward returns when the session's server did not answer (nothing was sent).
UNREACHABLE = object()

_decide_in_database = PROXY_DB(access.decide)
_decisions = DecisionCache(lambda: settings.SESSION_PROXY_DECISION_SECONDS)
_paces = RequestBudget(lambda: settings.SESSION_PROXY_REQUESTS_PER_SECOND, lambda: settings.SESSION_PROXY_BURST)


async def _over_pace(host_key: str, decision: access.Decision) -> float | None:
    """None once the caller may go on; a caller past its budget is held (a sleeping task costs
    nothing, and a flooding client's next request waits for this answer) until its budget
    allows, at most SESSION_PROXY_HOLD_SECONDS; past that, the seconds it should wait (429)."""
    key = ("user", decision.user_id) if decision.user_id is not None else ("host", host_key)
    # Each held request sleeps once, until its own turn (a herd of waiters woken together
    # to race for each token cost the event loop more than the requests did).
    wait = _paces.reserve(key, longest_wait=settings.SESSION_PROXY_HOLD_SECONDS)
    if wait is None:
        return _paces.seconds_until_next(key)
    if wait > 0:
        await asyncio.sleep(wait)
    return None


class SessionProxy:
    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            await self.http(scope, receive, send)
        elif scope["type"] == "websocket":
            await self.websocket(scope, receive, send)

    # --- HTTP --------------------------------------------------------------------------------

    async def http(self, scope, receive, send):
        path = scope["path"]
        if path == "/_gpupool/open":
            return await self._open(scope, send)
        host_key, decision = await _decide(scope)
        wait = await _over_pace(host_key, decision)
        if wait is not None:
            retry = str(max(1, round(wait))).encode()
            return await _respond(
                send, 429, b"Too many requests: slow down.\n", "text/plain", [(b"retry-after", retry)]
            )
        if await self._answer(scope, receive, send, host_key, decision) is UNREACHABLE:
            # The server did not answer: the decision may be a moment old and the session gone
            # since (stopped, culled). Asked again, the database says so; else the 502 stands.
            _host_key, now = await _decide(scope, fresh=True)
            if now == decision or await self._answer(scope, receive, send, host_key, now) is UNREACHABLE:
                await _page(
                    send,
                    502,
                    "The session's server is not answering",
                    "It may still be starting, or it has stopped. Try again in a moment.",
                    session_id=decision.session_id,
                )

    async def _answer(self, scope, receive, send, host_key: str, decision: access.Decision):
        """Answers the request as `decision` says; UNREACHABLE (nothing sent) when it is to be
        forwarded and the session's server does not answer."""
        path = scope["path"]
        if path == "/_gpupool/notice.js":
            return await _respond(send, 200, NOTICE_SCRIPT.read_bytes(), "text/javascript; charset=utf-8")
        if path == "/_gpupool/status" and decision.session_id is not None and decision.outcome != "sign_in":
            return await _respond(send, 200, await _status_json(decision.session_id), "application/json")
        if decision.outcome == "sign_in":
            target = f"{settings.SITE_URL}/sessions/open/{host_key}/?{urlencode({'next': _path_and_query(scope)})}"
            return await _respond(send, 302, b"", "text/plain", [(b"location", target.encode("latin-1", "replace"))])
        if decision.outcome == "not_found":
            return await _page(send, 404, "No such session", "There is no session here, or it is not yours.")
        if decision.outcome == "not_ready":
            return await _page(
                send,
                503,
                "The session is not ready yet",
                f"It is {decision.state}. Its page in the portal says when it is ready.",
                session_id=decision.session_id,
            )
        if decision.outcome == "stopped":
            return await _page(
                send,
                410,
                "This session has stopped",
                decision.message or "Start a new one from the portal.",
                session_id=decision.session_id,
            )
        if decision.by_cookie and scope["method"] not in SAFE_METHODS and not _from_this_origin(scope):
            return await _page(send, 403, "Refused", "This request did not come from the session's own pages.")
        return await self._forward(scope, receive, send, decision)

    async def _open(self, scope, send):
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        ticket = (query.get("ticket") or [""])[0]
        host_key = origins.host_key_of(_header(scope, b"host") or "")
        try:
            taken = await PROXY_DB(access.owner_for_ticket)(ticket) if ticket and host_key else None
        except origins.TicketsUnavailable:
            return await _page(
                send, 503, "Sessions cannot be opened right now", "The portal's Redis is not answering; try again soon."
            )
        if taken is None or taken[0].host_key != host_key:
            return await _page(send, 404, "This link has expired", "Open the session again from the portal.")
        session, user = taken
        value = await PROXY_DB(origins.cookie_value)(session.pk, user)
        secure = "; Secure" if settings.SESSIONS_SCHEME == "https" else ""
        cookie = (
            f"{origins.SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Lax;"
            f" Max-Age={origins.COOKIE_SECONDS}{secure}"
        )
        location = origins.safe_next((query.get("next") or ["/"])[0])
        headers = [(b"location", location.encode("latin-1", "replace")), (b"set-cookie", cookie.encode("latin-1"))]
        await _respond(send, 302, b"", "text/plain", headers)

    async def _forward(self, scope, receive, send, decision: access.Decision):
        url = f"http://{_upstream_base(decision)}{_path_and_query(scope)}"
        method = scope["method"]

        async def body():
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                if chunk:
                    yield chunk
                if not message.get("more_body"):
                    return

        if method == "GET" and is_navigation(scope.get("headers", ())):
            await note_navigation(decision.session_id)  # a page of it opened: use (interactive/browser_activity.py)
        has_body = method not in ("GET", "HEAD", "OPTIONS") or _header(scope, b"content-length") not in (None, "0")
        request = _client().build_request(
            method, url, headers=_upstream_headers(scope, decision), content=body() if has_body else None
        )
        try:
            response = await _client().send(request, stream=True)
        except httpx.HTTPError as exc:
            log.info("session %s: the server did not answer %s: %s", decision.session_id, method, exc)
            return UNREACHABLE
        try:
            inject = (
                method == "GET"
                and response.status_code == 200
                and response.headers.get("content-type", "").startswith("text/html")
            )
            headers = [
                (key.lower().encode("latin-1"), value.encode("latin-1"))
                for key, value in response.headers.multi_items()
                if key.lower().encode() not in HOP_BY_HOP and not _sets_our_cookie(key, value)
            ]
            if inject:
                await self._send_with_notice(response, headers, send, decision.token)
                return
            length = response.headers.get("content-length")
            if length is not None:
                headers.append((b"content-length", length.encode()))
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()

    async def _send_with_notice(self, response, headers, send, token: str):
        """A notebook page with the notice script added (decoded: its encoding header goes), and
        the server's token taken out: JupyterLab writes it into its page's config, and the browser
        needs none (the proxy adds it to every request). A page past INJECT_MAX_BYTES streams on
        without the notice, still scrubbed."""
        chunks, size, stream = [], 0, response.aiter_bytes()
        async for chunk in stream:
            chunks.append(chunk)
            size += len(chunk)
            if size > INJECT_MAX_BYTES:
                break
        page = b"".join(chunks)
        whole = size <= INJECT_MAX_BYTES
        if whole and b"</head>" in page:
            page = page.replace(b"</head>", NOTICE_TAG + b"</head>", 1)
        headers = [(key, value) for key, value in headers if key != b"content-encoding"]
        if whole:
            page = _scrub(page, token)
            headers.append((b"content-length", str(len(page)).encode()))
            await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
            await send({"type": "http.response.body", "body": page})
            return
        await send({"type": "http.response.start", "status": response.status_code, "headers": headers})
        # A token split across two chunks is caught by keeping its length less one byte back.
        keep = max(0, len(token) - 1)
        pending = page
        async for chunk in stream:
            pending = _scrub(pending + chunk, token)
            cut = len(pending) - keep
            await send({"type": "http.response.body", "body": pending[:cut], "more_body": True})
            pending = pending[cut:]
        await send({"type": "http.response.body", "body": _scrub(pending, token)})

    # --- WebSocket ---------------------------------------------------------------------------

    async def websocket(self, scope, receive, send):
        message = await receive()
        if message["type"] != "websocket.connect":
            return
        host_key, decision = await _decide(scope)
        if await _over_pace(host_key, decision) is not None:
            await send({"type": "websocket.close", "code": 4429})
            return
        if decision.outcome == "proxy" and decision.by_cookie and not _from_this_origin(scope):
            log.warning(
                "session %s: a socket from another origin refused (Origin %s, Host %s)",
                decision.session_id,
                _header(scope, b"origin"),
                _header(scope, b"host"),
            )
            await send({"type": "websocket.close", "code": 4403})
            return
        if decision.outcome != "proxy":
            # Refused before the handshake: the browser sees a 403, learns nothing more.
            await send({"type": "websocket.close", "code": 4404})
            return
        url = f"ws://{_upstream_base(decision)}{_path_and_query(scope)}"
        opening = asyncio.ensure_future(
            websocket_connect(
                url,
                additional_headers=_upstream_headers(scope, decision),
                subprotocols=scope.get("subprotocols") or None,
                origin=f"http://{_upstream_base(decision)}",
                max_size=settings.SESSION_WEBSOCKET_MAX_BYTES,
                compression=None,
                # A kernel socket answers once its kernel does (jupyter_server waits up to 60 s).
                open_timeout=60,
                ping_interval=None,
            )
        )
        # The browser may leave while the server makes it wait (a kernel shut down under it):
        # then the wait ends too, instead of holding this task until the server kills it.
        leaving = asyncio.ensure_future(receive())
        await asyncio.wait({opening, leaving}, return_when=asyncio.FIRST_COMPLETED)
        if not opening.done():
            opening.cancel()
            return
        try:
            upstream = opening.result()
        except (TimeoutError, OSError, InvalidHandshake, InvalidStatus) as exc:
            leaving.cancel()
            log.info("session %s: the server refused a WebSocket: %s", decision.session_id, exc)
            await send({"type": "websocket.close", "code": 1011})
            return
        await send({"type": "websocket.accept", "subprotocol": upstream.subprotocol})
        await _bridge(receive, send, upstream, first=leaving, watch=_watch_for(scope, decision))


def _watch_for(scope, decision: access.Decision) -> SocketWatch | None:
    """What the idle culling learns from a socket: a JupyterLab terminal's, or VS Code's."""
    if is_terminal_socket(scope.get("path", "")):
        return TerminalWatch(decision.session_id)
    if decision.kind == "vscode":
        return VsCodeWatch(decision.session_id)
    return None


async def _bridge(receive, send, upstream, *, first: asyncio.Future, watch: SocketWatch | None = None) -> None:
    """Message for message both ways until either side closes. `first`: the browser's next
    message, already asked for while the server's handshake was awaited. `watch`: a socket whose
    use is noted for the idle culling (a terminal's keystrokes and output, VS Code's requests)."""

    async def noted(data, from_browser: bool) -> None:
        note = watch.seen(data, from_browser) if watch is not None else None
        if note is not None:
            await note

    async def browser_to_server():
        message = await first
        while True:
            if message["type"] == "websocket.disconnect":
                return
            if message["type"] == "websocket.receive":
                data = message.get("bytes")
                data = data if data is not None else message.get("text", "")
                await noted(data, True)
                await upstream.send(data)
            message = await receive()

    async def server_to_browser():
        try:
            async for data in upstream:
                await noted(data, False)
                if isinstance(data, bytes):
                    await send({"type": "websocket.send", "bytes": data})
                else:
                    await send({"type": "websocket.send", "text": data})
        except ConnectionClosed:
            pass
        await send({"type": "websocket.close", "code": 1000})

    tasks = [asyncio.ensure_future(browser_to_server()), asyncio.ensure_future(server_to_browser())]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await upstream.close()


def _scrub(data: bytes, token: str) -> bytes:
    return data.replace(token.encode(), b"") if token else data


def _from_this_origin(scope) -> bool:
    """Whether the browser says the request comes from the session's own origin. Every session
    and the portal may share a site (SameSite cookies do not tell them apart), so a page of
    another origin must not post to this one, nor open its kernels' sockets, with its cookie.
    Jupyter's own XSRF check does not apply: the proxy's token authenticates the request."""
    origin = _header(scope, b"origin")
    if origin is None:
        referer = _header(scope, b"referer") or ""
        origin = referer if referer.startswith(("http://", "https://")) else ""
    host = (_header(scope, b"host") or "").lower()
    return bool(origin) and host != "" and urlsplit(origin).netloc.lower() == host


def _sets_our_cookie(name: str, value: str) -> bool:
    return name.lower() == "set-cookie" and value.strip().startswith(f"{origins.SESSION_COOKIE}=")


async def _respond(send, status: int, body: bytes, content_type: str, headers=()):
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", content_type.encode()),
                (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _page(send, status: int, title: str, text: str, *, session_id: int | None = None):
    link = f"{settings.SITE_URL}/sessions/{session_id}/" if session_id else f"{settings.SITE_URL}/sessions/"
    body = (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f"<title>{escape(title)}</title><style>body{{font-family:system-ui,sans-serif;max-width:36rem;"
        "margin:3rem auto;padding:0 1rem;line-height:1.5}</style></head>"
        f"<body><h1>{escape(title)}</h1><p>{escape(text)}</p>"
        f'<p><a href="{escape(link)}">Back to the portal</a></p></body></html>'
    )
    await _respond(send, status, body.encode(), "text/html; charset=utf-8")


@PROXY_DB
def _session_status(session_id: int) -> dict:
    session = InteractiveSession.objects.select_related("job").get(pk=session_id)
    payload = session_payload(session)
    payload.pop("url", None)
    payload["warning_seconds"] = settings.SESSION_IDLE_WARNING_SECONDS
    return payload


async def _status_json(session_id: int) -> bytes:
    return json.dumps(await _session_status(session_id)).encode()


session_proxy = SessionProxy()
