"""Which pending jobs someone is looking at, so the mirror refreshes their expected start often
and everyone else's slowly (re-reading 50 pending jobs every pass cost 25 requests a
second to slurmrestd with nothing happening).

A job is watched for WATCH_SECONDS after a page or an API response showed it: its id goes in a
Redis sorted set scored by when the watch ends. Losing Redis loses only the "often": the
background refresh still reaches every pending job.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable

import redis

from foundation.redis_client import redis_client

log = logging.getLogger(__name__)
KEY = "gpupool:jobs:watched"
# Longer than the pages' polling fallback (10 s), so an open page keeps its jobs watched.
WATCH_SECONDS = 60


def _redis() -> redis.Redis:
    return redis_client(timeout=0.5)


def watch(job_pks: Iterable[int]) -> None:
    """Mark jobs (portal ids) as being looked at now. Never fails the page that calls it."""
    until = time.time() + WATCH_SECONDS
    members = {str(pk): until for pk in job_pks}
    if not members:
        return
    try:
        _redis().zadd(KEY, members)
    except redis.RedisError as exc:
        log.warning("could not mark %d jobs as watched: %s", len(members), exc)


def watch_pending(jobs) -> None:
    """Watch the pending ones of the jobs a page or response shows."""
    watch(job.pk for job in jobs if job.state == "PENDING")


def watched() -> set[int]:
    """Portal ids of the jobs someone looked at within WATCH_SECONDS (expired ones dropped)."""
    now = time.time()
    try:
        client = _redis()
        pipe = client.pipeline()
        pipe.zremrangebyscore(KEY, "-inf", now)
        pipe.zrangebyscore(KEY, now, "+inf")
        _, members = pipe.execute()
    except redis.RedisError as exc:
        log.warning("could not read the watched jobs: %s", exc)
        return set()
    return {int(member) for member in members}
