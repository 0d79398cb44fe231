"""The WebSocket's sign-in: Channels' cookie, session and auth middleware, with the user read
on the sockets' own database pool (foundation/async_db.py), not Channels' one shared thread."""

from channels.auth import AuthMiddleware, get_user
from channels.sessions import CookieMiddleware, SessionMiddleware

from foundation.async_db import SOCKETS_DB

# The function Channels wraps for its shared thread, on the sockets' pool instead.
_user_of = SOCKETS_DB(get_user.func)


class PooledAuthMiddleware(AuthMiddleware):
    async def resolve_scope(self, scope):
        scope["user"]._wrapped = await _user_of(scope)


def SignedInSockets(inner):  # noqa: N802 (named as Channels' AuthMiddlewareStack is)
    return CookieMiddleware(SessionMiddleware(PooledAuthMiddleware(inner)))
