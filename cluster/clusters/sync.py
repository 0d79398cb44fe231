"""What every mirror pass shares: one pass at a time across workers, its outcome recorded on
a SyncRun row (shown to admins), and the node mirror, which belongs to this layer.

Each pass is idempotent, and a Redis lock keeps two workers from doing the same pass at
once (the beat interval is shorter than a slow pass). A failing Slurm is recorded on the
SyncRun row and shown on the console; the next pass simply tries again.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import redis
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.errors import SlurmError
from cluster.models import SyncRun
from cluster.slurmrest.client import SlurmRestClient
from foundation.redis_client import redis_client

log = logging.getLogger(__name__)
NODE_SYNC_EVERY_SECONDS = 10


@contextmanager
def single_flight(name: str, timeout: int = 60):
    lock = redis_client().lock(f"gpupool:lock:{name}", timeout=timeout, blocking=False)
    acquired = lock.acquire()
    try:
        yield acquired
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                pass  # expired under a very slow pass; the next pass takes a new one


def record_run(name: str, started, *, error: str = "", summary: str = "") -> None:
    run, _ = SyncRun.objects.get_or_create(name=name)
    now = timezone.now()
    if error:
        SyncRun.objects.filter(pk=run.pk).update(last_started=started, last_error=error[:2000], last_error_at=now)
    else:
        SyncRun.objects.filter(pk=run.pk).update(
            last_started=started, last_success=now, last_error="", summary=summary[:300]
        )


def sync_nodes_if_due(client: SlurmRestClient, started) -> dict:
    """Mirror the nodes when the last success is older than NODE_SYNC_EVERY_SECONDS."""
    last_nodes = SyncRun.objects.filter(name="nodes").values_list("last_success", flat=True).first()
    if last_nodes is not None and (started - last_nodes).total_seconds() < NODE_SYNC_EVERY_SECONDS:
        return {}
    try:
        changed = mirror_nodes(client)
    except SlurmError as exc:
        log.warning("node mirror failed: %s", exc)
        record_run("nodes", started, error=str(exc))
        return {"nodes_error": str(exc)}
    record_run("nodes", started, summary=f"{changed} nodes changed")
    return {"nodes_changed": changed}
