"""Events from slurmctld: "job N changed", so the portal shows it now rather than on the
next mirror pass.

slurmd runs deploy/slurm-events/gpupool-slurm-event as its Prolog (a job starts on the node;
or slurmctld as its PrologSlurmctld) and slurmctld runs deploy/slurm-events/jobcomp.lua in its
own process for every end (a pending job cancelled and a requeue included). Both only leave a
file in a spool; gpupool-event-forwarder, a long-lived process beside each spool, posts what it
finds as one signed batch:

    X-Gpupool-Events: n=2;sha256=<hex digest of the body>;t=1764547200
    X-Gpupool-Signature: hex(HMAC-SHA256(secret, that line))

    job=123;state=RUNNING;hook=prolog_slurmctld
    job=124;state=CANCELLED;hook=jobcomp;ended=1764547199

The signature is checked before the body is read, and covers the body through its digest. A
single event without a body (X-Gpupool-Event: job=123;state=RUNNING;hook=...;t=...), what the
first sender posted, is still taken. A completion's state and end are written at once
(jobs.mirror.rows.apply_told_endings): a pending job cancelled is then settled, with nothing
to read, so the 2,000 ends of one scancel are a few UPDATEs and another user's cancel beside
them shows as soon as its event is here; any other ending is read from slurmrestd next, which
has the last word. The spool is SlurmUser's alone and the batch is signed; a signed line is
taken once (`first_time`: its signature is remembered in Redis for the freshness window), so a
line caught on the wire and sent again within its window is answered and does nothing.

Every other event adds its job to a Redis set of "dirty" jobs; one request at a time drains it (the
others return at once). A few jobs are read by id. A burst is read from the state listing
instead, in passes at most PASS_EVERY_SECONDS apart: a burst is a mass change (MASS_CHANGE jobs
dirty at once), BURST_EVENTS within half a second, or events that reach us
LAGGING_SECONDS after the job ended (completion scripts run as programs, jobcomp/script, come
out one at a time, about 60 a second on the dev machine, and trickle in for a minute after one
`scancel` of thousands). A listing pass shows every job's change at once, where thousands of
fetches by id would keep another job's change waiting behind them; and another user's few jobs
changing during one user's burst are read by id at once, by the request that brought their
events, beside the passes. Events lost while the portal is down cost only time: the polling
mirror stays as the safety net.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import re
import time
from collections import Counter
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import DatabaseError, transaction

from cluster.clusters.services import rest_client, slurm_cli
from cluster.clusters.sync import single_flight
from cluster.errors import SlurmError, SlurmNotFound
from cluster.records.job_reader import fetch_jobs
from cluster.records.types import TERMINAL_JOB_STATES
from foundation.redis_client import redis_client
from jobs.live.events import publish_job_updates
from jobs.mirror.arrays import apply_task_records, apply_told_tasks, refresh_array
from jobs.mirror.passes import ListingMemo, last_pass_took, listed_at, mirror_jobs
from jobs.mirror.rows import apply_slurm_job, apply_told_endings, finish_vanished_job
from jobs.models import Job
from jobs.tasks import sync_cluster

log = logging.getLogger(__name__)
DIRTY_KEY = "gpupool:jobs:dirty"
DRAIN_LOCK = "gpupool:lock:slurm-events-drain"
# Until this key expires, dirty jobs are read from the state listing (a burst).
BURST_KEY = "gpupool:jobs:events-burst"
BURST_HOLD_MS = 2000
# Events taken, one counter per RATE_WINDOW_SECONDS: this window's and the last one's together
# at BURST_EVENTS or more is a burst (the hook's queue in slurmctld is filling).
RATE_KEY = "gpupool:jobs:events-taken:"
RATE_WINDOW_SECONDS = 0.25
BURST_EVENTS = 8
# The same, per owner of the jobs: the owners of a burst, and the bystanders beside it.
OWNER_RATE_KEY = "gpupool:jobs:events-taken-by-owner:"
BYSTANDER_FETCHES = 20
PASS_GATE = "gpupool:jobs:events-listing-pass"
PASS_EVERY_SECONDS = 0.25
# Hooks whose word on an array task is written at once (apply_told_tasks): its end (jobcomp/lua
# names the task), its start where the hook is told the task (PrologSlurmctld; slurmd's Prolog is
# not, so a start from there is read by the task's own id).
TASK_HOOKS = frozenset({"prolog_slurmd", "prolog_slurmctld", "jobcomp"})
# What one job read by id costs slurmrestd and the portal (260 a second at 8-16 at once,
# bench/README.md): a burst's few dirty jobs are read so when that is cheaper than a pass.
BY_ID_READ_SECONDS = 0.005
# More dirty jobs than this at once is a mass change.
MASS_CHANGE = 200
# The passes events start look up only what changed since the last (jobs/mirror/passes.py).
_PASSES_MEMO = ListingMemo()
# The hook's "ended" is whole seconds: 2 s late means at least 1 s behind.
LAGGING_SECONDS = 2
# An event older (or further in the future) than this is refused: clocks of one cluster agree.
MAX_SKEW_SECONDS = 300
MAX_BATCH_EVENTS = 2000
MAX_JOB_ID = 2**32 - 1
# The longest line BATCH_LINE_RE takes (a 19-digit job, 32-letter state and hook, 12-digit end,
# an array task of a 19-digit array and a 10-digit index, its newline): the body's bound is the
# count times this (the count is checked first).
BYTES_PER_EVENT = len("job=;state=;hook=;ended=;task=_\n") + 19 + 32 + 32 + 12 + 19 + 10
EVENT_RE = re.compile(
    r"job=(?P<job>[1-9][0-9]{0,18});state=(?P<state>[A-Z_]{1,32});hook=(?P<hook>[a-z_]{1,32});t=(?P<t>[0-9]{1,12})"
)
BATCH_RE = re.compile(r"n=(?P<n>[1-9][0-9]{0,3});sha256=(?P<digest>[0-9a-f]{64});t=(?P<t>[0-9]{1,12})")
BATCH_LINE_RE = re.compile(
    r"job=(?P<job>[1-9][0-9]{0,18});state=(?P<state>[A-Z_]{1,32});hook=(?P<hook>[a-z_]{1,32})"
    r"(?:;ended=(?P<ended>[0-9]{1,12}))?(?:;task=(?P<array>[1-9][0-9]{0,18})_(?P<task>[0-9]{1,10}))?"
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
    # When the job ended, as the completion script was told (None from the other hooks).
    ended_at: int | None = None
    # An array's task: the array's job id and the task's index (the job id is the task's own).
    array_job_id: int | None = None
    array_task_id: int | None = None


@dataclass(frozen=True)
class EventBatch:
    """A batch's signed header: the body it vouches for is read next (read_batch)."""

    count: int
    digest: str
    sent_at: int

    @property
    def max_bytes(self) -> int:
        return self.count * BYTES_PER_EVENT


def sign(secret: str, line: str) -> str:
    return hmac.new(secret.encode(), line.encode(), hashlib.sha256).hexdigest()


def _check_signature(line: str | None, signature: str | None, header: str) -> None:
    secret = settings.SLURM_EVENTS_SECRET
    if not secret:
        raise EventRefused(404, "Slurm events are not enabled (SLURM_EVENTS_SECRET).")
    if not line or not signature:
        raise EventRefused(401, f"{header} and X-Gpupool-Signature are required.")
    if not hmac.compare_digest(sign(secret, line), signature.strip().lower()):
        raise EventRefused(401, "Bad signature.")


def _check_fresh(sent_at: int, now: float | None) -> None:
    if abs((now or time.time()) - sent_at) > MAX_SKEW_SECONDS:
        raise EventRefused(401, "Stale event.")


SEEN_KEY = "gpupool:jobs:events-seen:"


def first_time(signature: str) -> bool:
    """Claim a signed line's signature for the freshness window (both sides of it, and a
    minute): True the first time, False for a replay. A line is its signature's (HMAC), so the
    same signature is the same line; a sender's retry after a lost answer is a replay too, and
    the first one took its events."""
    return bool(redis_client().set(SEEN_KEY + signature, 1, nx=True, ex=2 * MAX_SKEW_SECONDS + 60))


def forget(signature: str) -> None:
    """A claimed line whose events could not be taken: its sender's retry is taken then."""
    redis_client().delete(SEEN_KEY + signature)


def verify(line: str | None, signature: str | None, *, now: float | None = None) -> SlurmEvent:
    """The event of a signed line, or EventRefused (404 when events are off, 401 on a bad or
    stale signature, 400 on a malformed line)."""
    _check_signature(line, signature, "X-Gpupool-Event")
    match = EVENT_RE.fullmatch(line)
    if match is None:
        raise EventRefused(400, "Malformed event line.")
    sent_at = int(match["t"])
    _check_fresh(sent_at, now)
    return SlurmEvent(job_id=int(match["job"]), state=match["state"], hook=match["hook"], sent_at=sent_at)


def verify_batch(line: str | None, signature: str | None, *, now: float | None = None) -> EventBatch:
    """A batch's header, checked before its body is read (same refusals as verify)."""
    _check_signature(line, signature, "X-Gpupool-Events")
    match = BATCH_RE.fullmatch(line)
    if match is None:
        raise EventRefused(400, "Malformed batch line.")
    batch = EventBatch(count=int(match["n"]), digest=match["digest"], sent_at=int(match["t"]))
    if batch.count > MAX_BATCH_EVENTS:
        raise EventRefused(400, f"At most {MAX_BATCH_EVENTS} events a batch.")
    _check_fresh(batch.sent_at, now)
    return batch


def read_batch(batch: EventBatch, body: bytes) -> list[SlurmEvent]:
    """The events of a batch's body, or EventRefused (400) when it is not the body signed for:
    another digest, another count, a line not an event."""
    if not hmac.compare_digest(hashlib.sha256(body).hexdigest(), batch.digest):
        raise EventRefused(400, "The body is not the one signed for.")
    lines = body.decode("ascii", errors="replace").splitlines()
    if len(lines) != batch.count:
        raise EventRefused(400, f"{len(lines)} events where the header says {batch.count}.")
    events = []
    for line in lines:
        match = BATCH_LINE_RE.fullmatch(line)
        if match is None:
            raise EventRefused(400, "Malformed event line.")
        ended = match["ended"]
        events.append(
            SlurmEvent(
                job_id=int(match["job"]),
                state=match["state"],
                hook=match["hook"],
                sent_at=batch.sent_at,
                ended_at=int(ended) if ended else None,
                array_job_id=int(match["array"]) if match["array"] else None,
                array_task_id=int(match["task"]) if match["task"] else None,
            )
        )
    return events


def _redis() -> redis.Redis:
    return redis_client()


def accept(event: SlurmEvent) -> int:
    """One event: see accept_many."""
    return accept_many([event])


def accept_many(events: list[SlurmEvent], *, now: float | None = None) -> int:
    """Take the events and write what they changed (see mark and after_taken); rows written."""
    return after_taken(mark(events, now=now))


@dataclass(frozen=True)
class Taken:
    # Rows written from the events themselves (a completion's state and end), not yet pushed.
    written: list[int]
    # Another user's few jobs during one user's burst: drain reads these by id at once.
    bystanders: set[int]


def mark(events: list[SlurmEvent], *, now: float | None = None) -> Taken:
    """Write what the completions among these events tell (apply_told_endings: a pending job
    cancelled is settled then, nothing to read) and what they say of array tasks
    (apply_told_tasks: a start or an end, read again later), note whether they are a burst, and
    mark the other jobs dirty. Quick: the events' request answers after this and drains only then, so
    the forwarder's next batch never waits for a read from Slurm or a listing pass."""
    # Slurm's job ids are 32-bit: a larger one (the grammar allows 19 digits) is no job of ours,
    # and must not fail the batch it came in (a database refusing the number).
    events = [event for event in events if event.job_id <= MAX_JOB_ID and (event.array_job_id or 0) <= MAX_JOB_ID]
    if not events:
        return Taken([], set())
    client = _redis()
    now = now or time.time()
    tasks: dict[tuple[int, int], tuple[int, str, int | None]] = {}
    for event in events:
        if event.array_job_id is None or event.array_task_id is None or event.hook not in TASK_HOOKS:
            continue
        key = (event.array_job_id, event.array_task_id)
        # A short task's start and end in one batch: the end is the news.
        if key not in tasks or tasks[key][1] not in TERMINAL_JOB_STATES:
            tasks[key] = (event.job_id, event.state, event.ended_at)
    endings = {
        event.job_id: (event.state, event.ended_at)
        for event in events
        if event.hook == "jobcomp" and event.array_job_id is None
    }
    told, settled = apply_told_endings(endings) if endings else ([], set())
    # A task's start and end are written now; the array is read after (its details, exit code).
    told += apply_told_tasks(tasks)
    job_ids = {event.job_id for event in events} - settled
    burst = note_burst(client, events, now=now)
    bystanders = _bystanders(client, job_ids, now=now) if burst and job_ids else set()
    if job_ids - bystanders:
        client.sadd(DIRTY_KEY, *(job_ids - bystanders))
    return Taken(told, bystanders)


def after_taken(taken: Taken) -> int:
    """What follows the answer to the events: push the rows they wrote to their owners' pages
    (building the messages of hundreds of rows must not hold the forwarder's next batch), then
    drain. Returns the rows written, by the events and since."""
    if taken.written:
        publish_job_updates(taken.written)
    return len(taken.written) + drain(taken.bystanders)


def drain(bystanders: set[int] = frozenset()) -> int:
    """Read the bystanders' jobs by id, then drain the dirty set unless another request is
    draining it. Returns how many rows this call wrote."""
    client = _redis()
    written = 0
    if bystanders:
        written = refresh_jobs(sorted(bystanders))
        log.info("beside a burst, read by id: jobs %s, %d rows written", sorted(bystanders), written)
    # The loop closes the gap between the drainer's last empty read and its unlock.
    while client.scard(DIRTY_KEY):
        lock = client.lock(DRAIN_LOCK, timeout=30, blocking=False)
        if not lock.acquire():
            break  # the drainer will see these jobs
        try:
            written += _drain(client)
        finally:
            try:
                lock.release()
            except redis.exceptions.LockError:
                pass
    return written


def note_burst(client: redis.Redis, events: list[SlurmEvent], *, now: float) -> bool:
    """Count these events in their window; when this window and the last one hold BURST_EVENTS
    or more, or an event reaches us LAGGING_SECONDS after its job ended, the dirty jobs are read
    from the listing for the next BURST_HOLD_MS. Returns whether that is so now."""
    window = int(now / RATE_WINDOW_SECONDS)
    pipe = client.pipeline()
    pipe.incrby(f"{RATE_KEY}{window}", len(events))
    pipe.expire(f"{RATE_KEY}{window}", 5)
    pipe.get(f"{RATE_KEY}{window - 1}")
    this_window, _, last_window = pipe.execute()
    lagging = any(event.ended_at is not None and now - event.ended_at >= LAGGING_SECONDS for event in events)
    if lagging or this_window + int(last_window or 0) >= BURST_EVENTS:
        client.set(BURST_KEY, 1, px=BURST_HOLD_MS)
        return True
    return bool(client.exists(BURST_KEY))


def _bystanders(client: redis.Redis, job_ids: set[int], *, now: float) -> set[int]:
    """Of these jobs, those whose owner is not in the burst: fewer than BURST_EVENTS of their
    events in this window and the last, and at most BYSTANDER_FETCHES of them. A mass change is
    one user's (a scancel, a sweep ending); everyone else's jobs keep the by-id path's speed."""
    owners = dict(
        Job.objects.on_cluster().filter(slurm_job_id__any_of=list(job_ids)).values_list("slurm_job_id", "owner_id")
    )
    if not owners:
        return set()
    window = int(now / RATE_WINDOW_SECONDS)
    counts = Counter(str(owner) for owner in owners.values())
    pipe = client.pipeline()
    for owner, count in counts.items():
        pipe.hincrby(f"{OWNER_RATE_KEY}{window}", owner, count)
    pipe.expire(f"{OWNER_RATE_KEY}{window}", 5)
    pipe.hgetall(f"{OWNER_RATE_KEY}{window - 1}")
    *this_window, _, last_window = pipe.execute()
    seen = {
        owner: taken + int(last_window.get(owner.encode(), 0)) for owner, taken in zip(counts, this_window, strict=True)
    }
    quiet = {job_id for job_id, owner in owners.items() if seen[str(owner)] < BURST_EVENTS}
    return quiet if len(quiet) <= BYSTANDER_FETCHES else set()


def _drain(client: redis.Redis) -> int:
    written = 0
    while True:
        if client.exists(BURST_KEY):
            dirty = client.scard(DIRTY_KEY)
            if not dirty:
                return written
            if _reading_by_id_is_cheaper(dirty):
                # A sweep's tasks starting, a few a second: a pass over 10,000 tasks costs seconds,
                # their reads by id a few milliseconds each.
                written += _refresh_or_keep(client, [int(member) for member in client.spop(DIRTY_KEY, dirty)])
                continue
            # Jobs marked from here on stay dirty for the next round: they need a listing read
            # after their mark, and this one's may be under way already.
            marked_by = time.time()
            client.delete(DIRTY_KEY)
            written += _listing_pass(client, marked_by)
            continue
        ids = [int(member) for member in client.spop(DIRTY_KEY, MASS_CHANGE)]
        if not ids:
            return written
        if len(ids) >= MASS_CHANGE:
            # A mass change: the rest of the set is the same story; passes read it all.
            client.set(BURST_KEY, 1, px=BURST_HOLD_MS)
            client.sadd(DIRTY_KEY, *ids)
            continue
        written += _refresh_or_keep(client, ids)


def _refresh_or_keep(client: redis.Redis, ids: list[int]) -> int:
    """refresh_jobs, and when the database refuses the writes (a deadlock with another writer,
    a restart), the jobs go back in the dirty set for the next drain, not lost until a pass."""
    try:
        started = time.monotonic()
        written = refresh_jobs(ids)
        log.info(
            "drained %d jobs by id in %.0f ms, %d rows written", len(ids), 1000 * (time.monotonic() - started), written
        )
        return written
    except DatabaseError:
        client.sadd(DIRTY_KEY, *ids)
        raise


def _reading_by_id_is_cheaper(count: int) -> bool:
    """Whether `count` jobs read by id cost less than a listing pass did last time."""
    took = last_pass_took()
    return took is not None and count * BY_ID_READ_SECONDS < took


def _listing_pass(client: redis.Redis, marked_by: float) -> int:
    """Rows written by a mirror pass (the state listing, details only for what changed) that
    listed after `marked_by`: one of our own, no sooner than PASS_EVERY_SECONDS after the last
    one events started, or the beat's when it is under way and listed after that time (then
    this waits for it to end, and writes nothing itself)."""
    wait_ms = client.pttl(PASS_GATE)
    if wait_ms > 0:
        time.sleep(wait_ms / 1000)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with single_flight("sync_cluster") as acquired:
            if acquired:
                if listed_at() > marked_by:
                    return 0  # a pass that listed after the mark ended while we looked
                client.set(PASS_GATE, 1, px=int(PASS_EVERY_SECONDS * 1000))
                try:
                    started = time.monotonic()
                    result = mirror_jobs(rest_client(), queue=slurm_cli(), memo=_PASSES_MEMO)
                except SlurmError as exc:
                    log.warning("a listing pass for Slurm events failed: %s", exc)
                    return 0
                log.info(
                    "listing pass for Slurm events: %d jobs listed, %d rows written in %.0f ms",
                    result.seen,
                    result.changed,
                    1000 * (time.monotonic() - started),
                )
                return result.changed
        time.sleep(0.02)
    _request_mirror_pass()
    return 0


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
    # A task under its own id is read alone (its record is the answer); the task under the array's
    # own id (the last of its tasks to start) is answered with every record of the array, so that
    # array is read whole.
    tasks = [job for job in found if job.is_array_task and job.job_id != job.array_job_id]
    changed += apply_task_records(tasks)
    arrays = {job.array_job_id for job in found if job.is_array_task and job.job_id == job.array_job_id}
    for job in found:
        if job.is_array_task:
            continue
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
