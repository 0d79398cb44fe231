"""Celery beat that sends periodic tasks from one process only, however many are started.

A site runs one beat; a second one, started by mistake (two hosts given the same units, a
failover that did not stop the old one), would send every periodic task twice. Most tasks
are safe run twice (single-flight locks, unique keys), but "most" is not a guarantee and the
work is still doubled. So each beat takes a lease in Redis before it sends anything and
renews it on every tick; a beat without the lease sends nothing and stands by, and takes over
within LEASE_SECONDS when the leader dies or loses Redis (at once when the dead leader was a
process of its own host: a beat restarted by its supervisor).

The lease is a Redis key holding this beat's token (`SET NX PX`); it is renewed and released
only by its holder (compare-and-set scripts), so a beat that lost it (expired while the
process was stopped, wiped by a Redis restart and taken by the other beat) never deletes
the new leader's. Without Redis no beat leads: the task queue is on the same Redis, so
nothing could be sent anyway.

Selected by CELERY_BEAT_SCHEDULER in gpupool/settings.py: every `celery beat` uses it.
"""

from __future__ import annotations

import logging
import os
import socket
import uuid

from celery.beat import PersistentScheduler

from foundation.redis_client import redis_client

log = logging.getLogger(__name__)

LEASE_KEY = "gpupool:beat:leader"
# How long a lease lasts without renewal: how long a standby waits after the leader died.
LEASE_SECONDS = 30
# Ticks are at most this far apart, so a leader renews well before its lease runs out, and
# a standby looks again this often.
TICK_SECONDS = 5.0

_RENEW = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
_TAKE_OVER = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('set', KEYS[1], ARGV[2], 'PX', ARGV[3])
end
return 0
"""
_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""


class BeatLease:
    """One beat's claim to be the one that sends. `hold()` takes or renews it."""

    def __init__(self, client=None, *, key: str = LEASE_KEY, seconds: int = LEASE_SECONDS):
        self.client = client
        self.key = key
        self.milliseconds = int(seconds * 1000)
        self.token = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.held = False

    def _redis(self):
        return self.client if self.client is not None else redis_client(timeout=2)

    def hold(self) -> bool:
        """True when this beat holds the lease now (renewed for another LEASE_SECONDS)."""
        try:
            redis = self._redis()
            held = (
                bool(redis.eval(_RENEW, 1, self.key, self.token, self.milliseconds))
                or bool(redis.set(self.key, self.token, nx=True, px=self.milliseconds))
                or self._take_over_from_the_dead(redis)
            )
        except Exception as exc:  # Redis down: nothing can be sent; whoever reaches it first leads
            if self.held:
                log.warning("beat: lease not renewed (Redis: %s); standing by", exc)
            held = False
        if held != self.held:
            state = "leading: this beat sends the periodic tasks" if held else "standing by: another beat leads"
            log.warning("beat: %s", state)
        self.held = held
        return held

    def _take_over_from_the_dead(self, redis) -> bool:
        """A lease whose holder was a process on this host that is gone (a beat killed and
        restarted by its supervisor) is taken at once, not after LEASE_SECONDS: the periodic
        tasks (the cluster mirror every 2 s among them) would otherwise stop that long after
        every crash. Only a holder this host can see dead is replaced; another host's waits."""
        holder = redis.get(self.key)
        if holder is None:
            return False
        host, _, rest = holder.decode(errors="replace").partition(":")
        pid = rest.partition(":")[0]
        if host != socket.gethostname() or not pid.isdigit() or _alive(int(pid)):
            return False
        if redis.eval(_TAKE_OVER, 1, self.key, holder, self.token, self.milliseconds):
            log.warning("beat: took over the lease of %s, a beat of this host that is gone", holder.decode())
            return True
        return False

    def release(self) -> None:
        if not self.held:
            return
        try:
            self._redis().eval(_RELEASE, 1, self.key, self.token)
        except Exception as exc:
            log.warning("beat: lease not released (it expires by itself): %s", exc)
        self.held = False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive
    return True


class SingleBeatScheduler(PersistentScheduler):
    """PersistentScheduler that ticks only while it holds the BeatLease."""

    lease_class = BeatLease

    def __init__(self, *args, **kwargs):
        self.lease = self.lease_class()
        super().__init__(*args, **kwargs)

    def tick(self, *args, **kwargs):
        if not self.lease.hold():
            return TICK_SECONDS
        return min(super().tick(*args, **kwargs), TICK_SECONDS)

    def close(self):
        super().close()
        self.lease.release()
