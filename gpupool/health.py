"""GET /healthz and GET /readyz, bare ASGI paths (like the ingest and the Slurm events) for the
reverse proxy, a load balancer and the process supervisor.

Bare, not Django views: a health check comes straight to a web process over plain HTTP, often
by address, so Django's host check (ALLOWED_HOSTS) would answer 400 and SECURE_SSL_REDIRECT a
301; neither says whether the process works.

- `/healthz`: this process's event loop answers. No database, no Redis: a shared dependency
  that fails must not take every web process out of the proxy's rotation at once (pages that
  need neither, and the clear "try again" answers of those that do, are still served).
- `/readyz`: the database answers `SELECT 1` and Redis answers `PING`, each within a short
  timeout; 503 with what failed otherwise. For monitoring and for deploy scripts that wait for
  a process to be of use (deploy/local-production.sh), not for taking processes out of rotation.
"""

from __future__ import annotations

import logging

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection

from foundation.asgi_json import respond_json
from foundation.redis_client import redis_client

log = logging.getLogger(__name__)
# Seconds a readiness check waits for Redis; the database's wait is its connect timeout.
REDIS_TIMEOUT = 1.0


def _check_database() -> str:
    close_old_connections()  # a connection PostgreSQL dropped while it restarted is not reused
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
        return "ok"
    except Exception as exc:
        log.warning("readiness: database not answering: %s", exc)
        connection.close()  # the next check opens a fresh one
        return "unavailable"


def _check_redis() -> str:
    try:
        redis_client(timeout=REDIS_TIMEOUT).ping()
        return "ok"
    except Exception as exc:
        log.warning("readiness: Redis not answering: %s", exc)
        return "unavailable"


def readiness() -> dict:
    return {"database": _check_database(), "redis": _check_redis()}


async def health_app(scope, receive, send):
    if scope["method"] not in ("GET", "HEAD"):
        await respond_json(send, 405, {"detail": "GET only."}, no_store=True)
        return
    head = scope["method"] == "HEAD"
    if scope["path"].rstrip("/").endswith("readyz"):
        checks = await sync_to_async(readiness, thread_sensitive=False)()
        ready = all(value == "ok" for value in checks.values())
        await respond_json(
            send,
            200 if ready else 503,
            {"status": "ok" if ready else "unavailable", **checks},
            head=head,
            no_store=True,
        )
        return
    await respond_json(send, 200, {"status": "ok"}, head=head, no_store=True)
