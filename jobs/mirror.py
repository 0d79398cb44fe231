"""Mirror Slurm's jobs into the Job table, cheaply.

Slurm's `jobs/state/` lists ids and states only (~30 ms for 3,000 jobs, where the full
`/jobs` costs seconds and grows slurmrestd by gigabytes), so every pass reads it and fetches
details, by id and a few at a time, just for jobs that are new or whose state changed; a job
that ended without ever starting (a mass cancel of pending jobs) is written from the listing
alone, in bulk. The full list is never read. `update_time` cannot narrow this: slurmctld compares it with
one global "last change" time, so it returns everything or nothing. Jobs that leave
slurmctld's memory (MinJobAge) before we saw their end are finished from slurmdbd.

Every write is a conditional UPDATE on the state string we read, so two passes racing
never overwrite a newer state with an older one, and a pass repeated changes nothing.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

import foundation.lookups  # noqa: F401  (registers __any_of)
from cluster.cli import SlurmCli
from cluster.errors import SlurmError, SlurmNotFound
from cluster.gres import requested_quota
from cluster.queue import pending_job_details
from cluster.services import rest_client
from cluster.slurmrest.client import SlurmRestClient
from cluster.types import TERMINAL_JOB_STATES
from cluster.types import Job as SlurmJob
from jobs.events import publish_job_update, publish_job_updates
from jobs.models import FINAL_STATES, Job, JobState
from jobs.protocol import COMMENT_PREFIX
from jobs.watching import watched

log = logging.getLogger(__name__)

# Watched pending jobs (an open page, an API client) have their expected start re-read this
# often, at most PENDING_REFRESH_PER_PASS a pass; the others every BACKGROUND_PENDING_REFRESH,
# a few a pass, so an idle pass with thousands queued asks slurmrestd almost nothing.
PENDING_REFRESH = timedelta(seconds=30)
PENDING_REFRESH_PER_PASS = 50
BACKGROUND_PENDING_REFRESH = timedelta(minutes=10)
BACKGROUND_REFRESH_PER_PASS = 5
# Changed jobs are fetched and written this many at a time (fetches concurrently).
FETCH_BATCH = 200
WRITE_BATCH = 500
VANISHED_PER_PASS = 200
QUEUE_TIMEOUT_SECONDS = 10.0
QUEUE_RETRY_AFTER = 60.0
_queue_unavailable_until = 0.0
# Fewer new pending jobs than this are fetched by id: a squeue run costs ~10 ms on the dev
# cluster and far more behind an ssh prefix, a few fetches by id less.
QUEUE_MIN_JOBS = 20
# Endings a job can reach without ever running: the listing alone says all there is.
NEVER_STARTED_ENDINGS = frozenset({"CANCELLED", "FAILED", "DEADLINE", "TIMEOUT", "NODE_FAIL", "BOOT_FAIL"})


@dataclass
class MirrorResult:
    seen: int = 0
    fetched: int = 0
    changed: int = 0
    finished_from_accounting: int = 0


def _cancel_orphan(job: SlurmJob) -> None:
    try:
        rest_client(job.user_name).cancel_job(job.job_id)
    except SlurmError as exc:
        log.warning("could not cancel orphaned Slurm job %s: %s", job.job_id, exc)


def _uuid_or_none(text: str) -> uuid.UUID | None:
    try:
        return uuid.UUID(text)
    except ValueError:
        return None


def _state_signature(states: tuple[str, ...]) -> str:
    return ",".join(states)


def _portal_state(state: str) -> str:
    return state if state in JobState.values else JobState.UNKNOWN


def _fields_from_slurm(job: SlurmJob) -> dict:
    return {
        "name": job.name[:200],
        "cluster_user": job.user_name,
        "account": job.account,
        "partition": job.partition,
        "qos": job.qos,
        "state": _portal_state(job.state),
        "slurm_states": _state_signature(job.states)[:200],
        "state_reason": "" if job.state_reason == "None" else job.state_reason[:200],
        "nodes": job.nodes[:500],
        "tres_per_node": job.tres_per_node[:200],
        "allocated_tres": job.allocated_tres[:500],
        "gpu_allocation": {node: list(indexes) for node, indexes in job.gpu_allocation.items()},
        "constraints": job.constraints[:200],
        "comment": job.comment[:500],
        "submit_time": job.submit_time,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "time_limit_minutes": job.time_limit_minutes,
        # Slurm says 0 for a job still running: that is no exit code yet.
        "exit_code": job.exit_code if job.is_terminal else None,
        "standard_output": job.standard_output[:500],
        "standard_error": job.standard_error[:500],
    }


def _owner_id_for(cluster_user: str) -> int | None:
    User = get_user_model()
    return User.objects.filter(profile__cluster_username=cluster_user).values_list("pk", flat=True).first()


# What a user watches change: a difference in any of these is written and pushed.
WATCHED_FIELDS = ("slurm_states", "state", "state_reason", "start_time", "end_time", "nodes", "gpu_allocation")


def _row(**lookup) -> dict | None:
    return Job.objects.filter(**lookup).values("pk", "cluster_user", *WATCHED_FIELDS).first()


def apply_slurm_job(job: SlurmJob) -> bool:
    """Record what Slurm says of one job. Returns True when the row changed."""
    fields = _fields_from_slurm(job)
    row = _row(slurm_job_id=job.job_id)
    if row is None and job.comment.startswith(COMMENT_PREFIX):
        portal_uuid = _uuid_or_none(job.comment[len(COMMENT_PREFIX) :])
        portal = (
            Job.objects.filter(uuid=portal_uuid).values("pk", "state", "slurm_job_id", "cluster_user").first()
            if portal_uuid
            else None
        )
        if portal is not None and portal["cluster_user"] != job.user_name:
            # Anyone can write any comment: only the job's own user's job can be the portal's.
            log.warning(
                "Slurm job %s of %s claims portal job %s of %s",
                job.job_id,
                job.user_name,
                portal_uuid,
                portal["cluster_user"],
            )
            portal = None
        if portal is not None:
            if portal["slurm_job_id"] is None and portal["state"] == JobState.CANCELLED and not job.is_terminal:
                # Cancelled while it was being submitted, and its worker died before it could
                # cancel what it had submitted: cancel it here, once, as its own user.
                _cancel_orphan(job)
                return False
            if portal["slurm_job_id"] is None and portal["state"] == JobState.SUBMITTING:
                # Slurm took the job before the submitting worker recorded it: attach it here.
                Job.objects.filter(pk=portal["pk"], slurm_job_id__isnull=True).update(slurm_job_id=job.job_id)
                row = _row(pk=portal["pk"])
            elif portal["slurm_job_id"] != job.job_id:
                # Cancelled before it reached Slurm (its worker cancels it there), or a
                # duplicate: either way not a job of its own in the portal.
                log.warning("Slurm job %s carries portal job %s, which is not waiting for it", job.job_id, portal_uuid)
                return False
    if row is None:
        try:
            with transaction.atomic():
                # A job from outside the portal (sbatch on a login node, a job's own
                # sbatch) counts toward its owner's quota like the portal's own.
                gpu_type, gpus, shards = requested_quota(job.tres_per_node)
                created = Job.objects.create(
                    slurm_job_id=job.job_id,
                    owner_id=_owner_id_for(job.user_name),
                    gpu_type=gpu_type,
                    quota_gpus=gpus,
                    quota_shards=shards,
                    **fields,
                )
        except IntegrityError:
            # Another pass created it first; fall through to the conditional update.
            row = _row(slurm_job_id=job.job_id)
        else:
            transaction.on_commit(lambda: publish_job_update(created.pk))
            return True
    if job.is_terminal and not fields["gpu_allocation"] and row["gpu_allocation"]:
        # slurmctld forgets which GPUs an ended job held (its gres_detail is empty); billing
        # attributes those GPUs' telemetry to the run, so the last allocation stays.
        fields["gpu_allocation"] = row["gpu_allocation"]
    if job.is_terminal and not fields["nodes"] and row["nodes"]:
        # Seen on 24.11 (v0.0.41 and v0.0.42 alike): a job just COMPLETED briefly reports no
        # nodes, then its nodes again. Where it ran does not change once it has ended.
        fields["nodes"] = row["nodes"]
    same_user = row["cluster_user"] == fields["cluster_user"]
    if same_user and all(row[name] == fields[name] for name in WATCHED_FIELDS):
        return False
    if not same_user:
        # The row's user came from a bulk read (cluster/queue.py) and slurmrestd names another:
        # slurmrestd's word stands, and the job counts toward that user's quota.
        fields["owner_id"] = _owner_id_for(fields["cluster_user"])
    updated = Job.objects.filter(pk=row["pk"], slurm_states=row["slurm_states"]).update(**fields)
    if updated:
        transaction.on_commit(lambda: publish_job_update(row["pk"]))
    return bool(updated)


def _finish_from_accounting(client: SlurmRestClient, job_pk: int, slurm_job_id: int, old_signature: str) -> bool:
    try:
        record = client.get_accounting(slurm_job_id)
    except SlurmNotFound:
        return False
    usage = {"elapsed_seconds": record.elapsed_seconds, "gpu_count": record.gpu_count} if record.is_settled else {}
    updated = Job.objects.filter(pk=job_pk, slurm_states=old_signature).update(
        state=_portal_state(record.state),
        slurm_states=_state_signature(record.states),
        start_time=record.start_time,
        end_time=record.end_time,
        exit_code=record.exit_code,
        **usage,  # unsettled: record_missing_accounting asks again later
    )
    if updated and record.ran_on:
        Job.objects.filter(pk=job_pk, nodes="").update(nodes=record.ran_on[:500])
    if updated:
        transaction.on_commit(lambda: publish_job_update(job_pk))
    return bool(updated)


def fetch_jobs(client: SlurmRestClient, job_ids: list[int]) -> list[SlurmJob]:
    """The details of `job_ids`, one request each, FETCH_CONCURRENCY at a time (never the
    full /jobs list, which grows slurmrestd by gigabytes at thousands of jobs). Jobs purged
    between the listing and the fetch are left out: the vanished-job pass handles them."""

    def fetch(job_id: int) -> SlurmJob | None:
        try:
            return client.get_job(job_id)
        except SlurmNotFound:
            return None

    if len(job_ids) <= 1:
        found = [fetch(job_id) for job_id in job_ids]
    else:
        with ThreadPoolExecutor(max_workers=min(settings.MIRROR_FETCH_CONCURRENCY, len(job_ids))) as pool:
            found = list(pool.map(fetch, job_ids))
    return [job for job in found if job is not None]


def _create_outside_jobs(jobs: list[SlurmJob]) -> int:
    """Rows for Slurm jobs the portal has never seen that were not submitted through it, in
    one INSERT (a mass submission of thousands is a few statements, not thousands); each
    counts toward its owner's quota like the portal's own. Returns the rows created."""
    if not jobs:
        return 0
    owners = dict(
        get_user_model()
        .objects.filter(profile__cluster_username__in={job.user_name for job in jobs})
        .values_list("profile__cluster_username", "pk")
    )
    rows = []
    for job in jobs:
        gpu_type, gpus, shards = requested_quota(job.tres_per_node)
        rows.append(
            Job(
                slurm_job_id=job.job_id,
                owner_id=owners.get(job.user_name),
                gpu_type=gpu_type,
                quota_gpus=gpus,
                quota_shards=shards,
                **_fields_from_slurm(job),
            )
        )
    ids = [job.job_id for job in jobs]
    with transaction.atomic():
        before = set(Job.objects.filter(slurm_job_id__any_of=ids).values_list("slurm_job_id", flat=True))
        # A job another pass created meanwhile is left to it (the unique Slurm id).
        Job.objects.bulk_create([row for row in rows if row.slurm_job_id not in before], ignore_conflicts=True)
        new_pks = list(
            Job.objects.filter(slurm_job_id__any_of=[i for i in ids if i not in before]).values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: publish_job_updates(new_pks))
    return len(new_pks)


def finish_vanished_job(client: SlurmRestClient, slurm_job_id: int) -> bool:
    """A job slurmctld no longer has, if the portal still has it unfinished: its end from
    slurmdbd. True when the row changed."""
    row = (
        Job.objects.filter(slurm_job_id=slurm_job_id)
        .exclude(state__in=FINAL_STATES)
        .values_list("pk", "slurm_states")
        .first()
    )
    if row is None:
        return False
    return _finish_from_accounting(client, row[0], slurm_job_id, row[1])


def _apply_from_listing(rows: dict[int, dict], live: dict[int, str], job_ids: list[int]) -> list[int]:
    """Jobs that ended without ever starting (a pending job cancelled, or refused by the
    scheduler) change nothing but their state: written straight from the state listing, in
    bulk, without fetching each one. A mass cancel of thousands of pending jobs is a few
    UPDATEs. Returns the portal ids written; their end time is the pass's (slurmdbd's exact
    one follows with the accounting)."""
    now = timezone.now()
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for job_id in job_ids:
        groups[(rows[job_id]["slurm_states"], live[job_id])].append(rows[job_id]["pk"])
    written: list[int] = []
    for (old_signature, new_signature), pks in groups.items():
        state = _portal_state(new_signature.split(",")[0])
        for batch in _batches(pks, WRITE_BATCH):
            # Small transactions: a mass change never holds other rows' updates for long.
            with transaction.atomic():
                matched = list(
                    Job.objects.filter(pk__in=batch, slurm_states=old_signature, start_time__isnull=True)
                    .select_for_update(skip_locked=True)
                    .values_list("pk", flat=True)
                )
                Job.objects.filter(pk__in=matched).update(
                    state=state, slurm_states=new_signature[:200], state_reason="", end_time=now, updated_at=now
                )
                transaction.on_commit(lambda pks=matched: publish_job_updates(pks))
            written += matched
    return written


def _batches(items: list, size: int):
    for offset in range(0, len(items), size):
        yield items[offset : offset + size]


def _pending_due_for_refresh(live: dict[int, str], exclude: set[int]) -> set[int]:
    """Pending jobs whose expected start is due for a re-read: the ones someone is looking at
    (jobs/watching.py) every PENDING_REFRESH, the others every BACKGROUND_PENDING_REFRESH, a
    few per pass. Slurm moves a pending job's estimate without a state change."""
    now = timezone.now()
    pending = Job.objects.filter(state=JobState.PENDING, slurm_job_id__isnull=False)
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


def _read_new_pending(queue: SlurmCli | None, live_states: dict[int, tuple[str, ...]]) -> dict[int, SlurmJob]:
    """New pending jobs' details from one squeue run per thousands (cluster/queue.py), for a
    mass submission; {} without a CLI, or when squeue fails (they are fetched by id then, and
    squeue is not asked again for QUEUE_RETRY_AFTER: a stalled login node would otherwise
    cost every pass its timeout). A job the portal submitted is left to the fetch by id,
    which reads its output paths."""
    global _queue_unavailable_until
    if queue is None or len(live_states) < QUEUE_MIN_JOBS or time.monotonic() < _queue_unavailable_until:
        return {}
    try:
        found = pending_job_details(replace(queue, timeout=min(queue.timeout, QUEUE_TIMEOUT_SECONDS)), live_states)
    except (SlurmError, OSError, ValueError) as exc:
        _queue_unavailable_until = time.monotonic() + QUEUE_RETRY_AFTER
        log.warning("squeue could not read %s new jobs, fetching them by id: %s", len(live_states), exc)
        return {}
    return {job_id: job for job_id, job in found.items() if not job.comment.startswith(COMMENT_PREFIX)}


def _detail_batches(client: SlurmRestClient, read: dict[int, SlurmJob], to_fetch: list[int]):
    """Batches of details: the ones squeue already read, then the rest fetched by id."""
    ready = list(read.values())
    for batch in _batches(ready, WRITE_BATCH):
        yield batch
    for batch in _batches([job_id for job_id in to_fetch if job_id not in read], FETCH_BATCH):
        yield fetch_jobs(client, batch)


def mirror_jobs(client: SlurmRestClient, queue: SlurmCli | None = None) -> MirrorResult:
    """One pass. With `queue` (the Slurm CLI), a burst of new pending jobs is read with squeue
    in bulk rather than one `GET /job/{id}` each."""
    result = MirrorResult()
    entries = client.list_job_states()
    result.seen = len(entries)
    live = {entry.job_id: _state_signature(entry.states) for entry in entries}
    rows = {
        row["slurm_job_id"]: row
        for row in Job.objects.filter(slurm_job_id__any_of=list(live)).values(
            "pk", "slurm_job_id", "slurm_states", "state", "start_time"
        )
    }
    changed_ids = [
        job_id for job_id, signature in live.items() if job_id not in rows or rows[job_id]["slurm_states"] != signature
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
    written = set(_apply_from_listing(rows, live, from_listing)) if from_listing else set()
    result.changed += len(written)
    skipped = {job_id for job_id in from_listing if rows[job_id]["pk"] in written}
    to_fetch = [job_id for job_id in changed_ids if job_id not in skipped]
    refreshed = _pending_due_for_refresh(live, exclude=set(to_fetch))
    to_fetch += sorted(refreshed)
    entry_states = {entry.job_id: entry.states for entry in entries}
    read = _read_new_pending(
        queue, {job_id: entry_states[job_id] for job_id in to_fetch if job_id not in rows and live[job_id] == "PENDING"}
    )

    unchanged = []
    for details in _detail_batches(client, read, to_fetch):
        result.fetched += len(details)
        # Jobs new to the portal from outside it (sbatch on a login node): one INSERT a batch.
        # The portal's own (their comment names a portal job) are attached one by one.
        outside = [job for job in details if job.job_id not in rows and not job.comment.startswith(COMMENT_PREFIX)]
        result.changed += _create_outside_jobs(outside)
        created = {job.job_id for job in outside}
        for job in details:
            if job.job_id in created:
                continue
            if apply_slurm_job(job):
                result.changed += 1
            elif job.job_id in refreshed:
                unchanged.append(job.job_id)
    if unchanged:
        # Checked and still the same: not due again until its next refresh.
        Job.objects.filter(slurm_job_id__any_of=unchanged).update(updated_at=timezone.now())

    # Jobs we last saw unfinished that slurmctld no longer lists: ask slurmdbd how they ended.
    vanished = (
        Job.objects.filter(slurm_job_id__isnull=False)
        .exclude(state__in=FINAL_STATES)
        .exclude(slurm_job_id__any_of=list(live))
        .values_list("pk", "slurm_job_id", "slurm_states")[:VANISHED_PER_PASS]
    )
    for job_pk, slurm_job_id, signature in vanished:
        if _finish_from_accounting(client, job_pk, slurm_job_id, signature):
            result.finished_from_accounting += 1
    return result


MAX_ACCOUNTING_ATTEMPTS = 20


def record_missing_accounting(client: SlurmRestClient, limit: int = 20) -> int:
    """Copy slurmdbd's elapsed time and GPU count onto finished jobs that lack them
    (billing reads these). slurmdbd may lag slurmctld, so a miss is asked again on a later
    pass, at most MAX_ACCOUNTING_ATTEMPTS times; `limit` bounds the work of one pass."""
    since = timezone.now() - timedelta(days=2)
    pending = list(
        Job.objects.filter(
            slurm_job_id__isnull=False,
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
        if Job.objects.filter(pk=job_pk, elapsed_seconds__isnull=True).update(
            elapsed_seconds=record.elapsed_seconds, gpu_count=record.gpu_count, **exact_end
        ):
            # A run the mirror first saw ended may have been listed without its nodes
            # (SlurmRestClient.ended_job_nodes): slurmdbd's record says where it ran.
            Job.objects.filter(pk=job_pk, nodes="").update(nodes=record.ran_on[:500])
            recorded += 1
            # An open job page shows the accounting as soon as it is here.
            transaction.on_commit(lambda pk=job_pk: publish_job_update(pk))
    return recorded
