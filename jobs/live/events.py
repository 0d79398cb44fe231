"""Live job events: pushed to the owner's sockets over the Channels layer.

Always called through `transaction.on_commit`, so a browser never hears of a state
that a rollback then took back.

Sending does not wait for Redis: messages go on one queue per process, sent in order by one
event loop thread (`_Publisher`). `async_to_sync` per message started an event loop each
time, about 5 ms of a job submission's path and of every mirror write.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import threading

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from jobs.diagnosis.reasons import explain_reason, short_reason
from jobs.models import Job
from jobs.signals import job_changed

log = logging.getLogger(__name__)


def user_group(user_id: int) -> str:
    """Every change of the user's jobs, and the user's other live events: the job list's pages."""
    return f"jobs.user.{user_id}"


def job_group(job_id: int) -> str:
    """One job's changes alone: that job's own pages (jobs/live/consumers.py)."""
    return f"jobs.job.{job_id}"


def user_control_group(user_id: int) -> str:
    """What every socket of the user hears, a job page's too: the account closed."""
    return f"jobs.user.{user_id}.control"


def job_payload(job) -> dict:
    return {
        "id": job.pk,
        "uuid": str(job.uuid),
        "slurm_job_id": job.slurm_job_id,
        "name": job.name,
        "state": job.state,
        "state_label": job.state_label,
        "state_reason": job.state_reason,
        "reason_text": explain_reason(job.state_reason),
        "reason_short": short_reason(job.state_reason),
        "allocated_tres": job.allocated_tres,
        "error": job.error,
        "nodes": job.nodes,
        "start_time": job.start_time.isoformat() if job.start_time else None,
        "end_time": job.end_time.isoformat() if job.end_time else None,
        "submit_time": job.submit_time.isoformat() if job.submit_time else None,
        "exit_code": job.exit_code if job.is_final else None,
        "elapsed_seconds": job.elapsed_seconds,
        "gpu_count": job.gpu_count or 0,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
        # A sweep's task: its page puts the state in the task's cell.
        "sweep": job.sweep_id,
        "sweep_index": job.sweep_index,
    }


def job_text(payload: dict) -> str:
    """The socket's message for one job, encoded once here rather than once per open page."""
    return json.dumps({"type": "job", "job": payload})


def _job_message(payload: dict) -> dict:
    """One job's change for the channel layer, its socket text encoded once."""
    return {"type": "job.update", "job": payload, "text": job_text(payload)}


class _Publisher:
    """One daemon thread running an event loop that sends queued messages one after another
    (so two updates of one job arrive in the order they were made). Started on first use and
    again in a forked child (a Celery worker's), which inherits no threads."""

    def __init__(self):
        self._lock = threading.Lock()
        self._pid = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue | None = None

    def send(self, group: str, message: dict) -> None:
        loop, queue = self._started()
        loop.call_soon_threadsafe(queue.put_nowait, (group, message))

    def _started(self):
        with self._lock:
            if self._pid != os.getpid():
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run():
                    asyncio.set_event_loop(loop)
                    self._queue = asyncio.Queue()
                    loop.create_task(self._deliver(self._queue))
                    loop.call_soon(ready.set)
                    loop.run_forever()

                threading.Thread(target=run, name="channels-publisher", daemon=True).start()
                ready.wait(5)
                self._loop, self._pid = loop, os.getpid()
            return self._loop, self._queue

    @staticmethod
    async def _deliver(queue: asyncio.Queue):
        layer = get_channel_layer()
        while True:
            group, message = await queue.get()
            try:
                await layer.group_send(group, message)
            except Exception:
                # A missed push is repaired by the pages' polling fallback.
                log.exception("could not publish %s to %s", message.get("type"), group)


_publisher = _Publisher()


def publish_job_update(job_id: int) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is not None:
        publish_job(job)


def publish_job(job: Job) -> None:
    """publish_job_update for a writer that holds the row as it now is (no re-read)."""
    if job.owner_id is None:
        return
    for receiver, outcome in job_changed.send_robust(sender=Job, job=job):
        if isinstance(outcome, Exception):
            log.error("receiver %s of job %s's change failed", receiver, job.pk, exc_info=outcome)
    message = _job_message(job_payload(job))
    _publisher.send(user_group(job.owner_id), message)
    _publisher.send(job_group(job.pk), message)


def publish_to_user(user_id: int, message: dict) -> None:
    """Any message (a Channels event: `type` names the consumer's handler) to a user's sockets,
    in order with their job updates. For layers above jobs (an interactive session's state)."""
    _publisher.send(user_group(user_id), message)


# One message to a user's sockets carries at most this many jobs.
JOBS_PER_MESSAGE = 200


def publish_job_updates(job_ids: list[int]) -> None:
    """publish_job_update for many jobs (a mass change): one query, and one message per owner
    and JOBS_PER_MESSAGE jobs instead of one per job."""
    by_owner: dict[int, list[dict]] = {}
    for job in Job.objects.filter(pk__in=job_ids, owner__isnull=False):
        by_owner.setdefault(job.owner_id, []).append(_job_message(job_payload(job)))
    for owner_id, singles in by_owner.items():
        for offset in range(0, len(singles), JOBS_PER_MESSAGE):
            chunk = singles[offset : offset + JOBS_PER_MESSAGE]
            jobs = [single["job"] for single in chunk]
            message = {
                "type": "jobs.update",
                "jobs": jobs,
                "texts": [single["text"] for single in chunk],
                "text": json.dumps({"type": "jobs", "jobs": jobs}),
            }
            _publisher.send(user_group(owner_id), message)
    # Then each job's own pages, after the lists (a group that is empty unless such a page is
    # open: one round trip to Redis each, so the lists are not kept waiting behind them).
    for singles in by_owner.values():
        for single in singles:
            _publisher.send(job_group(single["job"]["id"]), single)


def close_user_sockets(user_id: int) -> None:
    """Ends every live socket of a user (deactivated or deleted): they hear nothing more."""
    layer = get_channel_layer()
    try:
        for group in (user_group(user_id), user_control_group(user_id)):
            async_to_sync(layer.group_send)(group, {"type": "account.closed"})
    except Exception:
        # A socket left open still receives nothing new: its user can no longer sign in,
        # and the consumer re-checks the account on every event.
        log.exception("could not close the sockets of user %s", user_id)
