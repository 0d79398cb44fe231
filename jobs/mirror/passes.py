"""Mirror Slurm's jobs into the Job table, cheaply.

Slurm's `jobs/state/` lists ids and states only (~30 ms for 3,000 jobs, where the full
`/jobs` costs seconds and grows slurmrestd by gigabytes), so every pass reads it and fetches
details, by id and a few at a time, just for jobs that are new or whose state changed; a job
that ended without ever starting (a mass cancel of pending jobs) is written from the listing
alone, in bulk. The full list is never read. `update_time` cannot narrow this: slurmctld compares it with
one global "last change" time, so it returns everything or nothing. Jobs that leave
slurmctld's memory (MinJobAge) before we saw their end are finished from slurmdbd.

How Slurm is read is cluster.records.job_reader's; how a job's row is written, jobs/mirror/rows.py's
(conditional UPDATEs: two passes racing never overwrite a newer state with an older one).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

import redis
from django.db import transaction
from django.db.models import F
from django.utils import timezone

import foundation.lookups  # noqa: F401  (registers __any_of)
from cluster.clusters.registry import primary_cluster_name
from cluster.commands.cli import SlurmCli
from cluster.errors import SlurmNotFound
from cluster.records.job_reader import JobReader
from cluster.records.types import TERMINAL_JOB_STATES
from cluster.slurmrest.client import SlurmRestClient
from foundation.redis_client import redis_client
from jobs.live.events import publish_job_update
from jobs.live.watching import watched
from jobs.mirror.arrays import mirror_arrays
from jobs.mirror.rows import (
    accounting_usage,
    apply_from_listing,
    apply_pending_estimates,
    apply_slurm_job,
    create_outside_jobs,
    finish_from_accounting,
    state_signature,
)
from jobs.models import UNREAD_OR_UNFINISHED, Job, JobState
from jobs.protocol import COMMENT_PREFIX

log = logging.getLogger(__name__)
# When the last pass asked for the state listing (epoch seconds): Slurm's events wait for a pass
# that listed after them (jobs/slurm_events/receiving.py), and one already under way may be it.
LISTED_AT_KEY = "gpupool:jobs:listed-at"
PASS_TOOK_KEY = "gpupool:jobs:pass-took"

# Watched pending jobs (an open page, an API client) have their expected start re-read this
# often, at most PENDING_REFRESH_PER_PASS a pass; the others every BACKGROUND_PENDING_REFRESH,
# a few a pass, so an idle pass with thousands queued asks slurmrestd almost nothing.
PENDING_REFRESH = timedelta(seconds=30)
PENDING_REFRESH_PER_PASS = 50
BACKGROUND_PENDING_REFRESH = timedelta(minutes=10)
BACKGROUND_REFRESH_PER_PASS = 5
VANISHED_PER_PASS = 200
# Endings a job can reach without ever running: the listing alone says all there is.
NEVER_STARTED_ENDINGS = frozenset({"CANCELLED", "FAILED", "DEADLINE", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL"})


# A pass given a ListingMemo reads the rows of only the jobs whose listed state changed since
# its last pass, and every row again this often.
FULL_CHECK_SECONDS = 30


@dataclass
class ListingMemo:
    """What one process's passes found in step with Slurm: job id -> the state signature its
    row had then. A pass given it reads from the database only jobs listed otherwise now (and,
    as gone, only those listed last time and not now), so a pass during a burst of events costs
    the changes, not the whole queue; every FULL_CHECK_SECONDS a pass checks every row."""

    signatures: dict[int, str] = field(default_factory=dict)
    checked_at: float = float("-inf")

    def __post_init__(self):
        _memos.append(self)

    def due_for_full_check(self) -> bool:
        return time.monotonic() - self.checked_at > FULL_CHECK_SECONDS

    def forget(self) -> None:
        self.signatures = {}
        self.checked_at = float("-inf")


_memos: list[ListingMemo] = []


def forget_listing_memos() -> None:
    """Every memo back to empty: the next passes check every row (tests start from here, since
    each has a database of its own)."""
    for memo in _memos:
        memo.forget()


@dataclass
class MirrorResult:
    seen: int = 0
    fetched: int = 0
    changed: int = 0
    finished_from_accounting: int = 0


def note_listed(at: float) -> None:
    try:
        redis_client().set(LISTED_AT_KEY, repr(at), ex=3600)
    except redis.RedisError as exc:  # only events wait on it; they pass on their own then
        log.warning("could not note the listing's time: %s", exc)


def listed_at() -> float:
    value = redis_client().get(LISTED_AT_KEY)
    return float(value) if value else 0.0


def note_pass_took(seconds: float) -> None:
    """How long the last whole pass took: what reading jobs by id is weighed against
    (jobs/slurm_events/receiving.py). At 10,000 array tasks a pass is seconds, at 1,000 jobs 50 ms."""
    try:
        redis_client().set(PASS_TOOK_KEY, repr(seconds), ex=3600)
    except redis.RedisError as exc:
        log.warning("could not note the pass's time: %s", exc)


def last_pass_took() -> float | None:
    value = redis_client().get(PASS_TOOK_KEY)
    return float(value) if value else None


def _pending_due_for_refresh(live: dict[int, str], exclude: set[int], cluster: str | None = None) -> set[int]:
    """Pending jobs whose expected start is due for a re-read: the ones someone is looking at
    (jobs/live/watching.py) every PENDING_REFRESH, the others every BACKGROUND_PENDING_REFRESH, a
    few per pass. Slurm moves a pending job's estimate without a state change."""
    now = timezone.now()
    pending = Job.objects.on_cluster(cluster).filter(
        state=JobState.PENDING, slurm_job_id__isnull=False, array__isnull=True
    )
    watched_ids = watched()
    due: set[int] = set()
    if watched_ids:
        due |= set(
            pending.filter(pk__in=watched_ids, updated_at__lt=now - PENDING_REFRESH)
            .order_by("updated_at")
            .values_list("slurm_job_id", flat=True)[:PENDING_REFRESH_PER_PASS]
        )
    due |= set(
        pending.filter(updated_at__lt=now - BACKGROUND_PENDING_REFRESH)
        .order_by("updated_at")
        .values_list("slurm_job_id", flat=True)[:BACKGROUND_REFRESH_PER_PASS]
    )
    return {job_id for job_id in due if job_id in live and job_id not in exclude}


def mirror_jobs(
    client: SlurmRestClient,
    queue: SlurmCli | None = None,
    memo: ListingMemo | None = None,
    cluster: str | None = None,
) -> MirrorResult:
    """One pass over `cluster` (the portal's own by default; `client` and `queue` are that
    cluster's). With `queue` (the Slurm CLI), a burst of new pending jobs is read with squeue
    in bulk rather than one `GET /job/{id}` each; with `memo`, only changes are looked up."""
    result = MirrorResult()
    own = Job.objects.on_cluster(cluster)
    listing_asked_at = time.time()
    started = time.monotonic()
    listed = client.list_job_states()
    note_listed(listing_asked_at)
    result.seen = len(listed)
    # Array tasks are listed under their record's id and task id: read per array (arrays.py).
    entries = [entry for entry in listed if not entry.array_task]
    if cluster in (None, primary_cluster_name()):
        # Sweeps' arrays are submitted to the portal's own cluster only (sweeps/submit.py).
        result.changed += mirror_arrays(client, [entry for entry in listed if entry.array_task])
    live = {entry.job_id: state_signature(entry.states) for entry in entries}
    full_check = memo is None or memo.due_for_full_check()
    candidates = list(live) if full_check else [i for i, sig in live.items() if memo.signatures.get(i) != sig]
    rows = {
        row["slurm_job_id"]: row
        for row in own.filter(slurm_job_id__any_of=candidates).values(
            "pk", "slurm_job_id", "slurm_states", "state", "start_time"
        )
    }
    changed_ids = [
        job_id for job_id in candidates if job_id not in rows or rows[job_id]["slurm_states"] != live[job_id]
    ]
    # Ended without starting, as far as the listing and the row tell: no details needed.
    from_listing = [
        job_id
        for job_id in changed_ids
        if job_id in rows
        and rows[job_id]["start_time"] is None
        and rows[job_id]["state"] in (JobState.PENDING, JobState.SUBMITTING)
        and live[job_id].split(",")[0] in NEVER_STARTED_ENDINGS
    ]
    written = set(apply_from_listing(rows, live, from_listing)) if from_listing else set()
    result.changed += len(written)
    skipped = {job_id for job_id in from_listing if rows[job_id]["pk"] in written}
    to_fetch = [job_id for job_id in changed_ids if job_id not in skipped]
    entry_states = {entry.job_id: entry.states for entry in entries}
    reader = JobReader(client, queue)
    # Pending jobs due for a fresh estimate: one squeue run for all of them; by id without one.
    refreshed = _pending_due_for_refresh(live, exclude=set(to_fetch), cluster=cluster)
    estimates = reader.pending({job_id: entry_states[job_id] for job_id in refreshed})
    estimated, unchanged = apply_pending_estimates(list(estimates.values()), cluster)
    result.changed += len(estimated)
    refreshed -= set(estimates)
    to_fetch += sorted(refreshed)
    new_pending = {
        job_id: entry_states[job_id] for job_id in to_fetch if job_id not in rows and live[job_id] == "PENDING"
    }
    # A job the portal submitted is left to the fetch by id, which reads its output paths.
    read = {
        job_id: job
        for job_id, job in reader.new_pending(new_pending).items()
        if not job.comment.startswith(COMMENT_PREFIX)
    }

    fetched_ids: set[int] = set()
    for details in reader.detail_batches(read, to_fetch):
        result.fetched += len(details)
        fetched_ids.update(job.job_id for job in details)
        # Jobs new to the portal from outside it (sbatch on a login node): one INSERT a batch.
        # The portal's own (their comment names a portal job) are attached one by one.
        outside = [job for job in details if job.job_id not in rows and not job.comment.startswith(COMMENT_PREFIX)]
        result.changed += create_outside_jobs(outside, cluster)
        created = {job.job_id for job in outside}
        for job in details:
            if job.job_id in created:
                continue
            if apply_slurm_job(job, cluster):
                result.changed += 1
            elif job.job_id in refreshed:
                unchanged.append(job.job_id)
    if unchanged:
        # Checked and still the same: not due again until its next refresh.
        own.filter(slurm_job_id__any_of=unchanged).update(updated_at=timezone.now())

    # Jobs we last saw unfinished that slurmctld no longer lists: ask slurmdbd how they ended. So
    # too a job whose end an event told (its signature empty) and nobody read since: its exit code.
    unfinished = own.filter(slurm_job_id__isnull=False, array__isnull=True).filter(UNREAD_OR_UNFINISHED)
    if full_check:
        unfinished = unfinished.exclude(slurm_job_id__any_of=list(live))
    else:
        unfinished = unfinished.filter(slurm_job_id__any_of=[i for i in memo.signatures if i not in live])
    vanished = unfinished.values_list("pk", "slurm_job_id", "slurm_states")[:VANISHED_PER_PASS]
    for job_pk, slurm_job_id, signature in vanished:
        if finish_from_accounting(client, job_pk, slurm_job_id, signature):
            result.finished_from_accounting += 1
    if memo is not None:
        # In step now: rows that matched, were written from the listing, or were read in full;
        # a job whose details could not be read is looked up again next pass.
        changed = set(changed_ids)
        settled = [
            job_id
            for job_id in candidates
            if job_id in rows and (job_id not in changed or job_id in skipped or job_id in fetched_ids)
        ]
        kept = {} if full_check else {i: sig for i, sig in memo.signatures.items() if live.get(i) == sig}
        memo.signatures = kept | {job_id: live[job_id] for job_id in settled}
        if full_check:
            memo.checked_at = time.monotonic()
    note_pass_took(time.monotonic() - started)
    return result


MAX_ACCOUNTING_ATTEMPTS = 20


def record_missing_accounting(client: SlurmRestClient, limit: int = 20, cluster: str | None = None) -> int:
    """Copy slurmdbd's elapsed time and GPU count onto finished jobs that lack them
    (billing reads these). slurmdbd may lag slurmctld, so a miss is asked again on a later
    pass, at most MAX_ACCOUNTING_ATTEMPTS times; `limit` bounds the work of one pass."""
    since = timezone.now() - timedelta(days=2)
    pending = list(
        Job.objects.on_cluster(cluster)
        .filter(
            slurm_job_id__isnull=False,
            # An array's tasks are read per array (jobs/mirror/arrays.py): slurmdbd answers an
            # array's id, which its last task also has, with every task of the array.
            array__isnull=True,
            elapsed_seconds__isnull=True,
            state__in=TERMINAL_JOB_STATES,
            accounting_attempts__lt=MAX_ACCOUNTING_ATTEMPTS,
            updated_at__gte=since,
        )
        .order_by("accounting_attempts", "-updated_at")
        .values_list("pk", "slurm_job_id")[:limit]
    )
    recorded = 0
    for job_pk, slurm_job_id in pending:
        Job.objects.filter(pk=job_pk).update(accounting_attempts=F("accounting_attempts") + 1)
        try:
            record = client.get_accounting(slurm_job_id)
        except SlurmNotFound:
            continue
        if not record.is_settled:
            continue  # slurmdbd has not heard all of the run yet
        # slurmdbd's end time too: a job ended from the state listing has the pass's.
        exact_end = {"end_time": record.end_time} if record.end_time else {}
        if Job.objects.filter(pk=job_pk, elapsed_seconds__isnull=True).update(**accounting_usage(record), **exact_end):
            # A run the mirror first saw ended may have been listed without its nodes
            # (SlurmRestClient.ended_job_nodes): slurmdbd's record says where it ran.
            Job.objects.filter(pk=job_pk, nodes="").update(nodes=record.ran_on[:500])
            recorded += 1
            # An open job page shows the accounting as soon as it is here.
            transaction.on_commit(lambda pk=job_pk: publish_job_update(pk))
    return recorded
