"""Each session is served from an origin of its own, `s-<host key>.<SESSIONS_DOMAIN>`, so a
notebook's script can never act with the portal's cookies or another session's.

The browser reaches a session with a cookie set on its host only (SESSION_COOKIE below): it gets
one by way of the portal, which checks who is signed in and hands over a one-time ticket
(`open_ticket`), taken once by the proxy (`take_ticket`). An API client sends its portal API token
instead (Authorization: Bearer). Neither ever reaches the server: the proxy puts the session's
own token in their place.
"""

from __future__ import annotations

import re
import secrets
from urllib.parse import urlencode

import redis
from django.conf import settings
from django.core import signing

from foundation.redis_client import redis_client

SESSION_COOKIE = "gpupool_session"
TICKET_SECONDS = 120
COOKIE_SECONDS = 12 * 3600
_TICKET_SALT = "interactive.ticket"
_COOKIE_SALT = "interactive.cookie"
_HOST_KEY_RE = re.compile(r"s-([0-9a-f]{16})")


def session_host(host_key: str) -> str:
    return f"s-{host_key}.{settings.SESSIONS_DOMAIN}"


def session_origin(host_key: str) -> str:
    port = f":{settings.SESSIONS_PORT}" if settings.SESSIONS_PORT else ""
    return f"{settings.SESSIONS_SCHEME}://{session_host(host_key)}{port}"


def host_key_of(host_header: str) -> str | None:
    """The session's key if `host_header` (with or without a port) names a session, else None."""
    host = host_header.strip().lower()
    if host.startswith("["):
        return None
    host = host.rsplit(":", 1)[0] if ":" in host else host
    label, dot, domain = host.partition(".")
    if not dot or domain != settings.SESSIONS_DOMAIN.lower():
        return None
    match = _HOST_KEY_RE.fullmatch(label)
    return match[1] if match else None


def safe_next(path) -> str:
    """A path on the session's origin to land on; anything else (another host, `//x`) is / (every
    app's home: JupyterLab sends it on to /lab).
    Control characters and spaces are refused too: browsers drop a tab or a newline from a URL,
    so "/<TAB>/evil.example" lands on //evil.example, another host."""
    if (
        isinstance(path, str)
        and path.startswith("/")
        and not path.startswith("//")
        and "\\" not in path
        and not any(ord(char) <= 0x20 or ord(char) == 0x7F for char in path)
    ):
        return path[:2000]
    return "/"


def open_url(session, user, next_path: str = "/") -> str:
    """Where the portal sends its signed-in owner: the session's origin with a one-time ticket."""
    nonce = secrets.token_urlsafe(12)
    ticket = signing.TimestampSigner(salt=_TICKET_SALT).sign(f"{session.pk}.{user.pk}.{nonce}")
    query = urlencode({"ticket": ticket, "next": safe_next(next_path)})
    return f"{session_origin(session.host_key)}/_gpupool/open?{query}"


class TicketsUnavailable(Exception):
    """Redis, where taken tickets are remembered, did not answer: no ticket can be taken now."""


def take_ticket(ticket: str) -> tuple[int, int] | None:
    """(session id, user id) of a valid ticket not taken before; None otherwise.
    TicketsUnavailable when Redis does not answer (a ticket is never taken twice, so none is)."""
    try:
        value = signing.TimestampSigner(salt=_TICKET_SALT).unsign(ticket, max_age=TICKET_SECONDS)
    except signing.BadSignature:
        return None
    session_id, user_id, nonce = value.split(".", 2)
    try:
        taken = redis_client(timeout=2).set(f"gpupool:session-ticket:{nonce}", 1, nx=True, ex=TICKET_SECONDS + 5)
    except redis.RedisError as exc:
        raise TicketsUnavailable(str(exc)) from exc
    if not taken:
        return None  # taken already: a ticket opens one browser, once
    return int(session_id), int(user_id)


def cookie_value(session_id: int, user) -> str:
    # The user's auth hash: a password change (or a sign-out everywhere) ends the cookie too.
    return signing.TimestampSigner(salt=_COOKIE_SALT).sign(
        f"{session_id}.{user.pk}.{user.get_session_auth_hash()[:20]}"
    )


def read_cookie(value: str) -> tuple[int, int, str] | None:
    """(session id, user id, auth hash prefix) of a valid cookie; None otherwise."""
    try:
        text = signing.TimestampSigner(salt=_COOKIE_SALT).unsign(value, max_age=COOKIE_SECONDS)
    except signing.BadSignature:
        return None
    session_id, user_id, auth_hash = text.split(".", 2)
    return int(session_id), int(user_id), auth_hash
