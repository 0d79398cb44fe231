"""Celery tasks of sessions: each takes ids and may run twice (a chain holds a Redis lease)."""

from __future__ import annotations

import secrets

from celery import shared_task
from django.conf import settings

from foundation.redis_client import redis_client
from interactive.actions import culling
from interactive.actions.starting import check_start
from interactive.models import InteractiveSession
from jobs.models import JobState

LEASE_SECONDS = 30


def _lease_key(session_id: int) -> str:
    return f"gpupool:session-follow:{session_id}"


@shared_task(ignore_result=True)
def follow_session_start(session_id: int, lease: str = "", attempt: int = 0) -> str:
    """Looks at a starting session every SESSION_START_POLL_SECONDS until its server answers (the
    page is then told at once), it ends, or it has waited too long (starting.py). One chain per
    session: a second start (the job's RUNNING told twice) finds the lease taken and leaves."""
    client = redis_client()
    key = _lease_key(session_id)
    if not lease:
        lease = secrets.token_hex(8)
        if not client.set(key, lease, nx=True, ex=LEASE_SECONDS):
            return "followed already"
    elif client.get(key) not in (lease, lease.encode()):
        return "lease lost"
    outcome = check_start(session_id)
    if outcome == "starting":
        client.set(key, lease, ex=LEASE_SECONDS)
        follow_session_start.apply_async(
            (session_id, lease, attempt + 1), countdown=settings.SESSION_START_POLL_SECONDS
        )
    else:
        client.delete(key)
    return outcome


@shared_task(ignore_result=True)
def look_at_starting_sessions() -> int:
    """The safety net (beat): running sessions not yet ready get a chain each, if they have none
    (a RUNNING told while the workers were down, a mass update that sent no per-job signal)."""
    ids = list(
        InteractiveSession.objects.filter(
            ready_at__isnull=True, error="", stop_reason="", job__state=JobState.RUNNING
        ).values_list("pk", flat=True)
    )
    for session_id in ids:
        follow_session_start.delay(session_id)
    return len(ids)


@shared_task(ignore_result=True)
def cull_idle_sessions() -> dict:
    return culling.cull_idle_sessions()
