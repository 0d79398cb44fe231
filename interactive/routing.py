"""Sends requests for a session's host name to the session proxy, the rest to the portal."""

from interactive.origins import host_key_of


class SessionHosts:
    def __init__(self, sessions, portal):
        self.sessions = sessions
        self.portal = portal

    async def __call__(self, scope, receive, send):
        if scope["type"] in ("http", "websocket"):
            for name, value in scope.get("headers", ()):
                if name == b"host":
                    if host_key_of(value.decode("latin-1")) is not None:
                        return await self.sessions(scope, receive, send)
                    break
        return await self.portal(scope, receive, send)
