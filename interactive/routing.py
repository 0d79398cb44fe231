"""Sends requests for a session's host name to the session proxy, the rest to the portal."""

from interactive.origins import host_key_of


def is_session_host(scope) -> bool:
    for name, value in scope.get("headers", ()):
        if name == b"host":
            return host_key_of(value.decode("latin-1")) is not None
    return False


class SessionHosts:
    def __init__(self, sessions, portal):
        self.sessions = sessions
        self.portal = portal

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket") and is_session_host(scope):
            return await self.sessions(scope, receive, send)
        return await self.portal(scope, receive, send)
