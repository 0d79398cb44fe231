"""One Redis client per process and address, reused: `redis.Redis.from_url` per call opened a
new connection every time and, in redis-py 7, read the package's version from its metadata
on each (about 2 ms of a job submission's 20). The client's connection pool is thread-safe
and notices a fork (a Celery worker's children get their own connections)."""

from __future__ import annotations

from functools import lru_cache

import redis
from django.conf import settings


@lru_cache(maxsize=8)
def _client(url: str, timeout: float | None) -> redis.Redis:
    return redis.Redis.from_url(url, socket_timeout=timeout, socket_connect_timeout=timeout)


def redis_client(*, timeout: float | None = None) -> redis.Redis:
    """The shared client for settings.REDIS_URL; `timeout` (seconds) for callers that must
    never wait long (a rate limit, a page's bookkeeping)."""
    return _client(settings.REDIS_URL, timeout)
