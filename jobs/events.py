"""Live job events: pushed to the owner's sockets over the Channels layer.

Always called through `transaction.on_commit`, so a browser never hears of a state
that a rollback then took back.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from jobs.models import Job
from jobs.reasons import explain_reason
from jobs.signals import job_changed

log = logging.getLogger(__name__)


def user_group(user_id: int) -> str:
    return f"jobs.user.{user_id}"


def job_payload(job) -> dict:
    return {
        "id": job.pk,
        "uuid": str(job.uuid),
        "slurm_job_id": job.slurm_job_id,
        "name": job.name,
        "state": job.state,
        "state_reason": job.state_reason,
        "reason_text": explain_reason(job.state_reason),
        "allocated_tres": job.allocated_tres,
        "error": job.error,
        "nodes": job.nodes,
        "start_time": job.start_time.isoformat() if job.start_time else None,
        "end_time": job.end_time.isoformat() if job.end_time else None,
        "submit_time": job.submit_time.isoformat() if job.submit_time else None,
        "exit_code": job.exit_code if job.is_final else None,
        "elapsed_seconds": job.elapsed_seconds,
        "gpu_count": job.gpus,
        "updated_at": job.updated_at.isoformat() if job.updated_at else None,
    }


def publish_job_update(job_id: int) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is None or job.owner_id is None:
        return
    for receiver, outcome in job_changed.send_robust(sender=Job, job=job):
        if isinstance(outcome, Exception):
            log.error("receiver %s of job %s's change failed", receiver, job_id, exc_info=outcome)
    layer = get_channel_layer()
    try:
        async_to_sync(layer.group_send)(user_group(job.owner_id), {"type": "job.update", "job": job_payload(job)})
    except Exception:
        # A missed push is repaired by the page's polling fallback; never fail the mirror.
        log.exception("could not publish the update of job %s", job_id)


# One message to a user's sockets carries at most this many jobs.
JOBS_PER_MESSAGE = 200


def publish_job_updates(job_ids: list[int]) -> None:
    """publish_job_update for many jobs (a mass change): one query, and one message per owner
    and JOBS_PER_MESSAGE jobs instead of one per job."""
    by_owner: dict[int, list[dict]] = {}
    for job in Job.objects.filter(pk__in=job_ids, owner__isnull=False):
        by_owner.setdefault(job.owner_id, []).append(job_payload(job))
    layer = get_channel_layer()
    for owner_id, payloads in by_owner.items():
        for offset in range(0, len(payloads), JOBS_PER_MESSAGE):
            chunk = payloads[offset : offset + JOBS_PER_MESSAGE]
            try:
                async_to_sync(layer.group_send)(user_group(owner_id), {"type": "jobs.update", "jobs": chunk})
            except Exception:
                log.exception("could not publish the updates of %d jobs", len(chunk))


def close_user_sockets(user_id: int) -> None:
    """Ends every live socket of a user (deactivated or deleted): they hear nothing more."""
    layer = get_channel_layer()
    try:
        async_to_sync(layer.group_send)(user_group(user_id), {"type": "account.closed"})
    except Exception:
        # A socket left open still receives nothing new: its user can no longer sign in,
        # and the consumer re-checks the account on every event.
        log.exception("could not close the sockets of user %s", user_id)
