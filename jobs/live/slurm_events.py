"""Events from slurmctld: "job N changed", so the portal shows it now rather than on the
next mirror pass.

The sender is deploy/slurm-events/gpupool-slurm-event, which slurmctld runs as its
PrologSlurmctld (a job starts), EpilogSlurmctld (a run ends, requeue included) and job
completion script (any end, a pending job cancelled included). It signs one line,

    X-Gpupool-Event: job=123;state=RUNNING;hook=prolog_slurmctld;t=1764547200
    X-Gpupool-Signature: hex(HMAC-SHA256(secret, that line))

and sends no body, so the signature is checked before anything else is read. The event is
only a nudge: the portal trusts nothing in it but the job id, and fetches that job from
slurmrestd itself. A forged or replayed event can at most make the portal look again.

Bursts are coalesced: each event adds its job to a Redis set of "dirty" jobs, and one
request at a time drains the set (the others return at once): a few jobs are fetched by id
and written; a mass change (thousands of events from one scancel) is handed to one mirror
pass, which writes such changes from the state listing in bulk. Events lost while the portal
is down cost nothing but time: the polling mirror stays as the safety net.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import transaction

from cluster.errors import SlurmError, SlurmNotFound
from cluster.job_reader import fetch_jobs
from cluster.services import rest_client
from foundation.redis_client import redis_client
from jobs.mirror.arrays import refresh_array
from jobs.mirror.rows import apply_slurm_job, finish_vanished_job
from jobs.tasks import sync_cluster

log = logging.getLogger(__name__)
DIRTY_KEY = "gpupool:jobs:dirty"
DRAIN_LOCK = "gpupool:lock:slurm-events-drain"
# More dirty jobs than this at once is a mass change: one mirror pass is cheaper.
MASS_CHANGE = 200
# An event older (or further in the future) than this is refused: clocks of one cluster agree.
MAX_SKEW_SECONDS = 300
EVENT_RE = re.compile(
    r"job=(?P<job>[1-9][0-9]{0,18});state=(?P<state>[A-Z_]{1,32});hook=(?P<hook>[a-z_]{1,32});t=(?P<t>[0-9]{1,12})"
)


class EventRefused(Exception):
    def __init__(self, status: int, detail: str):
        super().__init__(detail)
        self.status = status
        self.detail = detail


@dataclass(frozen=True)
class SlurmEvent:
    job_id: int
    state: str
    hook: str
    sent_at: int


def sign(secret: str, line: str) -> str:
    return hmac.new(secret.encode(), line.encode(), hashlib.sha256).hexdigest()


def verify(line: str | None, signature: str | None, *, now: float | None = None) -> SlurmEvent:
    """The event of a signed line, or EventRefused (404 when events are off, 401 on a bad or
    stale signature, 400 on a malformed line)."""
    secret = settings.SLURM_EVENTS_SECRET
    if not secret:
        raise EventRefused(404, "Slurm events are not enabled (SLURM_EVENTS_SECRET).")
    if not line or not signature:
        raise EventRefused(401, "X-Gpupool-Event and X-Gpupool-Signature are required.")
    if not hmac.compare_digest(sign(secret, line), signature.strip().lower()):
        raise EventRefused(401, "Bad signature.")
    match = EVENT_RE.fullmatch(line)
    if match is None:
        raise EventRefused(400, "Malformed event line.")
    sent_at = int(match["t"])
    if abs((now or time.time()) - sent_at) > MAX_SKEW_SECONDS:
        raise EventRefused(401, "Stale event.")
    return SlurmEvent(job_id=int(match["job"]), state=match["state"], hook=match["hook"], sent_at=sent_at)


def _redis() -> redis.Redis:
    return redis_client()


def accept(event: SlurmEvent) -> int:
    """Mark the job dirty and drain the dirty set unless another request is draining it.
    Returns how many jobs this call wrote."""
    client = _redis()
    client.sadd(DIRTY_KEY, event.job_id)
    written = 0
    # The loop closes the gap between the drainer's last empty read and its unlock.
    while client.scard(DIRTY_KEY):
        lock = client.lock(DRAIN_LOCK, timeout=30, blocking=False)
        if not lock.acquire():
            break  # the drainer will see this job
        try:
            written += _drain(client)
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:
                pass
    return written


def _drain(client: redis.Redis) -> int:
    written = 0
    while True:
        ids = [int(member) for member in client.spop(DIRTY_KEY, MASS_CHANGE)]
        if not ids:
            return written
        if len(ids) >= MASS_CHANGE:
            # A mass change: the rest of the set is the same story; one pass reads it all.
            client.delete(DIRTY_KEY)
            _request_mirror_pass()
            return written
        written += refresh_jobs(ids)


def refresh_jobs(job_ids: list[int]) -> int:
    """Fetch these jobs from slurmrestd and write what changed; a job slurmctld no longer has
    is finished from slurmdbd. Returns the rows changed."""
    slurm = rest_client()
    try:
        found = fetch_jobs(slurm, job_ids)
    except SlurmError as exc:
        log.warning("could not fetch %d jobs named by Slurm events: %s", len(job_ids), exc)
        return 0
    changed = 0
    arrays = {job.array_job_id for job in found if job.is_array_task}
    for job in found:
        if job.is_array_task:
            continue  # read with its whole array below
        with transaction.atomic():
            changed += apply_slurm_job(job)
    for array_job_id in arrays:
        try:
            changed += refresh_array(slurm, array_job_id)
        except SlurmError as exc:
            log.warning("could not read array %s named by a Slurm event: %s", array_job_id, exc)
    for job_id in set(job_ids) - {job.job_id for job in found}:
        try:
            changed += finish_vanished_job(slurm, job_id)
        except (SlurmNotFound, SlurmError):
            continue
    return changed


def _request_mirror_pass() -> None:
    try:
        sync_cluster.delay()
    except Exception as exc:  # the broker is down: the beat's next pass does the same
        log.warning("could not request a mirror pass: %s", exc)
