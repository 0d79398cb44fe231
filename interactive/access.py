"""Who may reach a session through the proxy, decided from the database row, never the URL.

The host name gives the session's key; the caller is the user of the cookie (set after a portal
ticket) or of the API token. Only the session's owner gets through; anybody else, and a key that
names nothing, gets the same 404, so sessions cannot be discovered.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.auth import get_user_model

from accounts.authentication import usable_token
from interactive import origins
from interactive.models import InteractiveSession, SessionState

User = get_user_model()


@dataclass(frozen=True)
class Decision:
    # "proxy": forward; "sign_in": send the browser to the portal for a ticket; "not_found";
    # "not_ready" (queued, starting) and "stopped": a page saying so.
    outcome: str
    session_id: int | None = None
    address: str = ""
    port: int | None = None
    token: str = ""
    state: str = ""
    message: str = ""
    # Signed in by this origin's cookie (a browser), not an API token: what it sends that changes
    # anything must come from this origin (interactive/proxy.py checks Origin).
    by_cookie: bool = False
    # The caller, once known (the proxy paces each user: interactive/proxy_decisions.py).
    user_id: int | None = None
    # The app (interactive/kinds.py): what its sockets say is read by its own rule.
    kind: str = ""


NOT_FOUND = Decision("not_found")


def user_of_bearer(header: str | None):
    if not header:
        return None
    scheme, _space, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    token = usable_token(key.strip())
    return token.user if token is not None else None


def user_of_cookie(session: InteractiveSession, cookie: str | None):
    parsed = origins.read_cookie(cookie) if cookie else None
    if parsed is None:
        return None
    session_id, user_id, auth_hash = parsed
    if session_id != session.pk:
        return None  # another session's cookie (it could only come from that session's origin)
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if user is None or user.get_session_auth_hash()[:20] != auth_hash:
        return None
    return user


def decide(host_key: str, *, cookie: str | None, bearer: str | None) -> Decision:
    session = InteractiveSession.objects.select_related("job").filter(host_key=host_key).first()
    if session is None:
        return NOT_FOUND
    user = user_of_bearer(bearer) if bearer else user_of_cookie(session, cookie)
    if user is None:
        # No credentials for this origin: the portal signs the browser in (or answers 404 to
        # anyone but the owner). An API caller with a bad token gets the 404 straight away.
        return NOT_FOUND if bearer else Decision("sign_in", session_id=session.pk)
    if user.pk != session.owner_id:
        return NOT_FOUND
    state = session.state
    if state == SessionState.READY and session.port:
        return Decision(
            "proxy",
            session_id=session.pk,
            address=session.address,
            port=session.port,
            token=session.token,
            state=state,
            by_cookie=not bearer,
            user_id=user.pk,
            kind=session.kind,
        )
    if state in (SessionState.QUEUED, SessionState.STARTING):
        return Decision("not_ready", session_id=session.pk, state=state, user_id=user.pk)
    message = session.error or session.job.error
    if session.stop_reason == InteractiveSession.StopReason.IDLE:
        message = "It was stopped after being idle."
    return Decision("stopped", session_id=session.pk, state=state, message=message, user_id=user.pk)


def owner_for_ticket(ticket: str) -> tuple[InteractiveSession, object] | None:
    taken = origins.take_ticket(ticket)
    if taken is None:
        return None
    session_id, user_id = taken
    session = InteractiveSession.objects.filter(pk=session_id, owner_id=user_id).first()
    user = User.objects.filter(pk=user_id, is_active=True).first()
    if session is None or user is None:
        return None
    return session, user
