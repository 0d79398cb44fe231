"""A fixed-window rate limit kept in Redis, shared by every web process."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from foundation.redis_client import redis_client

log = logging.getLogger(__name__)
_clock = time.time  # the tests fix it, so a minute boundary cannot fall inside one


@dataclass(frozen=True)
class RateDecision:
    allowed: bool
    retry_after: int  # seconds until the window resets (0 when allowed)


def _client() -> redis.Redis:
    return redis_client(timeout=1)


def hit(scope: str, key: str, *, limit: int, window_seconds: int = 60) -> RateDecision:
    """Count one request of `key` in the current window; refuse past `limit`.

    If Redis is unreachable the request is allowed: losing the limit for a minute is
    better than refusing every submission while Redis restarts."""
    now = _clock()
    name = _counter(scope, key, now, window_seconds)
    try:
        with _client().pipeline() as pipe:
            pipe.incr(name)
            pipe.expire(name, window_seconds + 1)
            count, _ = pipe.execute()
    except redis.RedisError as exc:
        log.warning("rate limit not applied, Redis unavailable: %s", exc)
        return RateDecision(True, 0)
    if count > limit:
        return RateDecision(False, window_seconds - int(now) % window_seconds or 1)
    return RateDecision(True, 0)


def refund(scope: str, key: str, *, window_seconds: int = 60) -> None:
    """Give back one count of the current window (a request that turned out not to count)."""
    name = _counter(scope, key, _clock(), window_seconds)
    try:
        _client().decr(name)
    except redis.RedisError as exc:
        log.warning("rate limit count not refunded, Redis unavailable: %s", exc)


def _counter(scope: str, key: str, now: float, window_seconds: int) -> str:
    """The Redis key counting `key`'s requests in the window `now` falls in."""
    return f"gpupool:rl:{scope}:{key}:{int(now) // window_seconds}"


def client_ip(request) -> str:
    """The client's address; X-Forwarded-For only counts behind a configured proxy."""
    if settings.TRUSTED_PROXY_COUNT:
        forwarded = [part.strip() for part in request.META.get("HTTP_X_FORWARDED_FOR", "").split(",") if part.strip()]
        if len(forwarded) >= settings.TRUSTED_PROXY_COUNT:
            return forwarded[-settings.TRUSTED_PROXY_COUNT]
    return request.META.get("REMOTE_ADDR", "unknown")
