"""Beat tasks that keep the portal's mirror of the cluster current.

Each pass is idempotent, and a Redis lock keeps two workers from doing the same pass at
once (the beat interval is shorter than a slow pass). A failing Slurm is recorded on the
SyncRun row and shown on the console; the next pass simply tries again.
"""

from __future__ import annotations

import logging
from contextlib import contextmanager

import redis
from celery import shared_task
from django.conf import settings
from django.utils import timezone

from cluster.errors import SlurmError
from cluster.mirror import mirror_nodes
from cluster.models import SyncRun
from cluster.services import rest_client

log = logging.getLogger(__name__)
NODE_SYNC_EVERY_SECONDS = 10


@contextmanager
def _single_flight(name: str, timeout: int = 60):
    lock = redis.Redis.from_url(settings.REDIS_URL).lock(f"gpupool:lock:{name}", timeout=timeout, blocking=False)
    acquired = lock.acquire()
    try:
        yield acquired
    finally:
        if acquired:
            try:
                lock.release()
            except redis.exceptions.LockError:
                pass  # expired under a very slow pass; the next pass takes a new one


def _record(name: str, started, *, error: str = "", summary: str = "") -> None:
    run, _ = SyncRun.objects.get_or_create(name=name)
    now = timezone.now()
    if error:
        SyncRun.objects.filter(pk=run.pk).update(last_started=started, last_error=error[:2000], last_error_at=now)
    else:
        SyncRun.objects.filter(pk=run.pk).update(
            last_started=started, last_success=now, last_error="", summary=summary[:300]
        )


def run_sync() -> dict:
    """One mirror pass; what the beat task and `manage.py cluster_sync` run."""
    from jobs.mirror import mirror_jobs

    client = rest_client()
    outcome: dict = {}
    started = timezone.now()
    try:
        result = mirror_jobs(client)
        outcome["jobs"] = result.__dict__
        _record("jobs", started, summary=f"{result.seen} jobs in Slurm, {result.changed} changed")
    except SlurmError as exc:
        log.warning("job mirror failed: %s", exc)
        _record("jobs", started, error=str(exc))
        outcome["jobs_error"] = str(exc)

    last_nodes = SyncRun.objects.filter(name="nodes").values_list("last_success", flat=True).first()
    if last_nodes is None or (started - last_nodes).total_seconds() >= NODE_SYNC_EVERY_SECONDS:
        try:
            outcome["nodes_changed"] = mirror_nodes(client)
            _record("nodes", started, summary=f"{outcome['nodes_changed']} nodes changed")
        except SlurmError as exc:
            log.warning("node mirror failed: %s", exc)
            _record("nodes", started, error=str(exc))
            outcome["nodes_error"] = str(exc)
    return outcome


@shared_task(ignore_result=True)
def sync_cluster() -> dict | None:
    with _single_flight("sync_cluster") as acquired:
        if not acquired:
            return None
        return run_sync()


@shared_task(ignore_result=True)
def sync_accounting() -> int | None:
    """Copy slurmdbd's figures onto finished jobs. Its own task: slurmdbd answers in tenths
    of a second, and the state mirror must not wait for it."""
    from jobs.mirror import record_missing_accounting

    with _single_flight("sync_accounting", timeout=300) as acquired:
        if not acquired:
            return None
        try:
            return record_missing_accounting(rest_client())
        except SlurmError as exc:
            log.warning("accounting sync failed: %s", exc)
            return None
