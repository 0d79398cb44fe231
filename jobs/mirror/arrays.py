"""Mirroring the portal's job arrays (a sweep's, sweeps/) into their task rows.

Slurm's state listing names an array's tasks "<record id>_<task id>": a task with a record of
its own under that record's job id, every task still pending under the array's id (the
array's one record for all of them). So each pass groups the listing's lines by array (its id,
and the ids its tasks were given), and only an array whose lines changed is read, with one
`GET /job/<array id>` for all its records (never one request per task); its tasks are written
from them in bulk. An array slurmctld no longer holds is finished from slurmdbd, again one
request for all its tasks. Arrays from outside the portal are not mirrored.

Writes are conditional, as for single jobs (jobs/mirror/rows.py): a task's row is changed only
from the state it was read in, and the pending tasks' shared record never overwrites a task
that already has a record of its own.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import defaultdict
from collections.abc import Iterable
from datetime import UTC, datetime

from django.db import IntegrityError, transaction
from django.db.models import Exists, F, OuterRef, Q
from django.utils import timezone

import foundation.lookups  # noqa: F401  (registers __any_of)
from cluster.errors import SlurmError, SlurmNotFound
from cluster.records.array_ids import expand_task_string
from cluster.records.types import TERMINAL_JOB_STATES, AccountingRecord, JobStateEntry
from cluster.records.types import Job as SlurmJob
from cluster.slurmrest.client import SlurmRestClient
from jobs.live.events import publish_job_updates
from jobs.mirror.rows import WATCHED_FIELDS, accounting_usage, portal_state, settle_allocation, state_signature
from jobs.models import FINAL_STATES, UNREAD_OR_UNFINISHED, Job, JobArray, JobState
from jobs.signals import array_tasks_ended

log = logging.getLogger(__name__)
# Arrays finished from slurmdbd, and given their accounting, per pass at most.
ACCOUNTING_ARRAYS_PER_PASS = 20
# An array gone from slurmctld whose tasks slurmdbd has not finished yet is asked about again
# after this long (its signature then records when it was last asked).
GONE_RETRY_SECONDS = 30
GONE_PREFIX = "gone "
MAX_ACCOUNTING_ATTEMPTS = 20

# Of Slurm's fields, what a task's row takes (its name, comment and log paths are the portal's).
_TASK_FIELDS = (
    "state",
    "slurm_states",
    "state_reason",
    "nodes",
    "allocated_tres",
    "gpu_allocation",
    "submit_time",
    "start_time",
    "end_time",
    "exit_code",
)


def _active_arrays():
    # A task told ended (an event, the listing) but not read yet keeps its array read: its exit
    # code, nodes and exact times come with that read.
    unfinished = Job.objects.filter(UNREAD_OR_UNFINISHED, array=OuterRef("pk"))
    return JobArray.objects.filter(state=JobArray.State.SUBMITTED, slurm_array_job_id__isnull=False).filter(
        Exists(unfinished)
    )


def _signature(entries: Iterable[JobStateEntry]) -> str:
    lines = sorted(f"{entry.job_id}_{entry.array_task}:{state_signature(entry.states)}" for entry in entries)
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def mirror_arrays(client: SlurmRestClient, entries: list[JobStateEntry]) -> int:
    """Write what changed of the portal's unfinished arrays; `entries` are the listing's array
    lines. Returns the task rows changed."""
    by_record: dict[int, list[JobStateEntry]] = defaultdict(list)
    for entry in entries:
        by_record[entry.job_id].append(entry)
    arrays = list(_active_arrays().values("pk", "slurm_array_job_id", "listing_signature"))
    if not arrays:
        return 0
    own_ids: dict[int, list[int]] = defaultdict(list)
    for array_pk, slurm_job_id in Job.objects.filter(
        array_id__in=[array["pk"] for array in arrays], slurm_job_id__isnull=False
    ).values_list("array_id", "slurm_job_id"):
        own_ids[array_pk].append(slurm_job_id)
    changed = 0
    gone = 0
    for array in arrays:
        record_ids = {array["slurm_array_job_id"], *own_ids[array["pk"]]}
        lines = [entry for record_id in record_ids for entry in by_record.get(record_id, ())]
        if not lines:
            # Gone from slurmctld with tasks unfinished: slurmdbd says how they ended. It may lag,
            # so it is asked again, every GONE_RETRY_SECONDS, until every task has ended.
            asked = array["listing_signature"].removeprefix(GONE_PREFIX)
            if asked.isdigit() and time.time() - int(asked) < GONE_RETRY_SECONDS:
                continue
            gone += 1
            if gone > ACCOUNTING_ARRAYS_PER_PASS:
                continue
            changed += finish_array_from_accounting(client, array["pk"], array["slurm_array_job_id"])
            JobArray.objects.filter(pk=array["pk"]).update(listing_signature=f"{GONE_PREFIX}{int(time.time())}")
            continue
        signature = _signature(lines)
        if signature == array["listing_signature"]:
            continue
        changed += _apply_listing_lines(array["slurm_array_job_id"], lines)
        try:
            records = client.get_array_jobs(array["slurm_array_job_id"])
        except SlurmNotFound:
            continue
        changed += apply_array_records(array["pk"], records)
        JobArray.objects.filter(pk=array["pk"]).update(listing_signature=signature)
    return changed


def _apply_listing_lines(array_job_id: int, lines: list[JobStateEntry]) -> int:
    """What the state listing already says of tasks with a record of their own (started, ended),
    written before the array is read: a 10,000-task array's read takes seconds, and the sweep's
    grid should not wait for it. The read then writes each task's whole record (the signature
    written here is empty). A line under the array's own id that has ended may be the pending
    tasks' shared record (cancelled together): left to the read."""
    told: ToldTasks = {}
    for entry in lines:
        if not entry.array_task.isdigit() or not entry.states:
            continue
        state = entry.states[0]
        if state == JobState.RUNNING or (state in TERMINAL_JOB_STATES and entry.job_id != array_job_id):
            told[(array_job_id, int(entry.array_task))] = (entry.job_id, state, None)
    written = apply_told_tasks(told)
    transaction.on_commit(lambda: publish_job_updates(written))
    return len(written)


def refresh_array(client: SlurmRestClient, array_job_id: int) -> int:
    """Read one array now (an event from slurmctld named one of its tasks)."""
    array_pk = JobArray.objects.filter(slurm_array_job_id=array_job_id).values_list("pk", flat=True).first()
    if array_pk is None:
        return 0
    try:
        records = client.get_array_jobs(array_job_id)
    except SlurmNotFound:
        records = []
    if not records:
        return finish_array_from_accounting(client, array_pk, array_job_id)
    return apply_array_records(array_pk, records)


# What an array task's event says: (array's job id, task id) -> (the task's own job id, its
# state, when it ended or None).
ToldTasks = dict[tuple[int, int], tuple[int, str, int | None]]


def apply_told_tasks(told: ToldTasks) -> list[int]:
    """What slurmctld's hooks or the state listing said of array tasks, written at once
    (jobs/slurm_events/receiving.py, _apply_listing_lines): a task started is RUNNING under its own job
    id from now, a task ended has its state and end. Both get an empty signature, which keeps the
    array read (_active_arrays) until its next read (apply_array_records) writes Slurm's whole
    record over them: nodes, exact times, exit code. A sweep's grid then moves with the event,
    not with that read, which for a 10,000-task array is seconds. One query reads an array's named
    rows; only those that move are written, each conditionally (a start never overwrites an end,
    an end never another end), skipping a row a reader holds (it is writing that task anyway).
    Returns the portal ids written."""
    if not told:
        return []
    arrays = dict(
        JobArray.objects.filter(slurm_array_job_id__any_of=sorted({array for array, _ in told})).values_list(
            "slurm_array_job_id", "pk"
        )
    )
    by_array: dict[int, dict[int, tuple[int, str, int | None]]] = defaultdict(dict)
    for (array_job_id, task_id), what in told.items():
        if array_job_id in arrays:  # else not the portal's array
            by_array[arrays[array_job_id]][task_id] = what
    written: list[int] = []
    now = timezone.now()
    for array_pk, tasks in by_array.items():
        rows = Job.objects.filter(array_id=array_pk, array_task_id__any_of=sorted(tasks)).values_list(
            "pk", "array_task_id", "slurm_job_id", "state"
        )
        for pk, task_id, own_id, state_now in rows:
            job_id, state, ended = tasks[task_id]
            if own_id not in (None, job_id):
                continue  # under another record: not this event's task
            if state in TERMINAL_JOB_STATES and state_now not in FINAL_STATES:
                end_time = datetime.fromtimestamp(ended, tz=UTC) if ended else now
                fields, in_state = {"state": state, "end_time": end_time}, ~Q(state__in=FINAL_STATES)
            elif state == JobState.RUNNING and state_now == JobState.PENDING:
                fields, in_state = {"state": JobState.RUNNING, "start_time": now}, Q(state=JobState.PENDING)
            else:
                continue
            if _write_told_task(pk, job_id, in_state, fields):
                written.append(pk)
    return written


def _write_told_task(pk: int, job_id: int, in_state: Q, fields: dict) -> bool:
    try:
        with transaction.atomic():
            held = Job.objects.filter(in_state, Q(slurm_job_id=job_id) | Q(slurm_job_id__isnull=True), pk=pk)
            if not list(held.select_for_update(skip_locked=True).values_list("pk", flat=True)):
                return False
            return bool(
                Job.objects.filter(pk=pk).update(
                    slurm_job_id=job_id, slurm_states="", updated_at=timezone.now(), **fields
                )
            )
    except IntegrityError:
        # Another row holds that Slurm id (a cluster whose ids started again): the read decides.
        log.warning("array task row %s: Slurm job %s is another row's", pk, job_id)
        return False


def apply_task_records(records: list[SlurmJob]) -> int:
    """Tasks read by their own job id (an event named them): each record written onto its task's
    row, without reading the rest of the array. Returns the rows changed."""
    by_array: dict[int, list[SlurmJob]] = defaultdict(list)
    for record in records:
        if record.array_task_id is not None:
            by_array[record.array_job_id].append(record)
    if not by_array:
        return 0
    arrays = JobArray.objects.filter(slurm_array_job_id__any_of=sorted(by_array)).values_list(
        "slurm_array_job_id", "pk"
    )
    return sum(apply_array_records(array_pk, by_array[array_job_id]) for array_job_id, array_pk in arrays)


def _task_fields(job: SlurmJob) -> dict:
    return {
        "state": portal_state(job.state),
        "slurm_states": state_signature(job.states)[:200],
        "state_reason": "" if job.state_reason == "None" else job.state_reason[:200],
        "nodes": job.nodes[:500],
        "allocated_tres": job.allocated_tres[:500],
        "gpu_allocation": {node: list(indexes) for node, indexes in job.gpu_allocation.items()},
        "submit_time": job.submit_time,
        "start_time": job.start_time,
        "end_time": job.end_time,
        "exit_code": job.exit_code if job.is_terminal else None,
    }


def apply_array_records(array_pk: int, records: list[SlurmJob]) -> int:
    """Write an array's records onto its task rows; returns the rows changed."""
    tasks = Job.objects.filter(array_id=array_pk)
    if all(record.array_task_id is not None for record in records):
        # Tasks' own records only (read by id): their rows, not the whole array's.
        tasks = tasks.filter(array_task_id__any_of=[record.array_task_id for record in records])
    rows = {row["array_task_id"]: row for row in tasks.values("pk", "array_task_id", "slurm_job_id", *WATCHED_FIELDS)}
    changed: list[int] = []
    ended = False
    with transaction.atomic():
        # The tasks' own records first (a task that has one is no longer the pending record's),
        # in task order: every writer of an array's rows locks them in the same order (a pass
        # writing the whole array and an event's read of a few tasks deadlocked otherwise).
        for record in sorted(records, key=lambda record: (record.array_task_id is None, record.array_task_id or 0)):
            if record.array_task_id is None:
                changed += _apply_pending_record(array_pk, record)
                continue
            row = rows.get(record.array_task_id)
            if row is None:
                continue
            fields = _task_fields(record)
            settle_allocation(record, fields, row)
            if row["slurm_job_id"] == record.job_id and all(row[name] == fields[name] for name in WATCHED_FIELDS):
                continue
            if Job.objects.filter(pk=row["pk"], slurm_states=row["slurm_states"]).update(
                slurm_job_id=record.job_id, **fields
            ):
                changed.append(row["pk"])
                ended = ended or record.is_terminal
        transaction.on_commit(lambda: publish_job_updates(changed))
        if ended:
            transaction.on_commit(lambda: _tell_tasks_ended(array_pk))
    return len(changed)


def _tell_tasks_ended(array_pk: int) -> None:
    array_tasks_ended.send_robust(sender=JobArray, array_pk=array_pk)


def _apply_pending_record(array_pk: int, record: SlurmJob) -> list[int]:
    """The array's record of its tasks without one of their own: all pending (or all ended
    together, cancelled before they started). Never overwrites a task that has its own record."""
    try:
        task_ids, _throttle = expand_task_string(record.array_task_string)
    except ValueError:
        log.warning("array %s: unreadable task string %r", record.array_job_id, record.array_task_string)
        return []
    signature = state_signature(record.states)[:200]
    reason = "" if record.state_reason == "None" else record.state_reason[:200]
    tasks = Job.objects.filter(array_id=array_pk, slurm_job_id__isnull=True).exclude(state__in=FINAL_STATES)
    if task_ids:
        tasks = tasks.filter(array_task_id__any_of=task_ids)
    elif not record.is_terminal:
        return []
    # else: ended together (cancelled while pending); Slurm then empties the task string (seen on
    # 26.05), and the tasks it stood for are exactly those without a record of their own.
    pks = list(tasks.exclude(slurm_states=signature, state_reason=reason).values_list("pk", flat=True))
    if not pks:
        return []
    ended = {"end_time": record.end_time or timezone.now()} if record.is_terminal else {}
    Job.objects.filter(pk__in=pks, slurm_job_id__isnull=True).exclude(state__in=FINAL_STATES).update(
        state=portal_state(record.state), slurm_states=signature, state_reason=reason, **ended
    )
    return pks


def _record_for(records: list[AccountingRecord], task_id: int, slurm_job_id: int | None) -> AccountingRecord | None:
    for record in records:
        if slurm_job_id is not None and record.job_id == slurm_job_id and task_id in record.array_task_ids:
            return record
    for record in records:
        if task_id in record.array_task_ids:
            return record
    return None


def finish_array_from_accounting(client: SlurmRestClient, array_pk: int, array_job_id: int) -> int:
    """Tasks slurmctld no longer holds, finished from slurmdbd's records of the array."""
    try:
        records = client.get_array_accounting(array_job_id)
    except (SlurmNotFound, SlurmError) as exc:
        log.info("array %s not in accounting yet: %s", array_job_id, exc)
        return 0
    changed = []
    with transaction.atomic():
        for pk, task_id, slurm_job_id, old in Job.objects.filter(UNREAD_OR_UNFINISHED, array_id=array_pk).values_list(
            "pk", "array_task_id", "slurm_job_id", "slurm_states"
        ):
            record = _record_for(records, task_id, slurm_job_id)
            if record is None or record.state not in TERMINAL_JOB_STATES:
                continue
            usage = accounting_usage(record) if record.is_settled else {}
            own = {"slurm_job_id": record.job_id} if len(record.array_task_ids) == 1 and slurm_job_id is None else {}
            if Job.objects.filter(pk=pk, slurm_states=old).update(
                state=portal_state(record.state),
                slurm_states=state_signature(record.states)[:200],
                start_time=record.start_time,
                end_time=record.end_time,
                exit_code=record.exit_code,
                **usage,
                **own,
            ):
                if record.ran_on:
                    Job.objects.filter(pk=pk, nodes="").update(nodes=record.ran_on[:500])
                changed.append(pk)
        transaction.on_commit(lambda: publish_job_updates(changed))
        if changed:
            transaction.on_commit(lambda: _tell_tasks_ended(array_pk))
    return len(changed)


def record_array_accounting(client: SlurmRestClient, limit: int = ACCOUNTING_ARRAYS_PER_PASS) -> int:
    """Elapsed time and GPUs of ended tasks from slurmdbd, one request per array (billing and the
    sweep's cost read them). A task that never ran gets 0 of each."""
    due = (
        Job.objects.filter(
            array__isnull=False,
            array__slurm_array_job_id__isnull=False,
            elapsed_seconds__isnull=True,
            state__in=TERMINAL_JOB_STATES,
            accounting_attempts__lt=MAX_ACCOUNTING_ATTEMPTS,
        )
        .values_list("array_id", "array__slurm_array_job_id")
        .distinct()
        .order_by("array_id")[:limit]
    )
    recorded = 0
    for array_pk, array_job_id in due:
        Job.objects.filter(array_id=array_pk, elapsed_seconds__isnull=True).update(
            accounting_attempts=F("accounting_attempts") + 1
        )
        try:
            records = client.get_array_accounting(array_job_id)
        except SlurmNotFound:
            continue
        changed = []
        for pk, task_id, slurm_job_id in Job.objects.filter(
            array_id=array_pk, elapsed_seconds__isnull=True, state__in=TERMINAL_JOB_STATES
        ).values_list("pk", "array_task_id", "slurm_job_id"):
            record = _record_for(records, task_id, slurm_job_id)
            if record is None or not record.is_settled:
                continue
            exact_end = {"end_time": record.end_time} if record.end_time else {}
            if Job.objects.filter(pk=pk, elapsed_seconds__isnull=True).update(**accounting_usage(record), **exact_end):
                changed.append(pk)
        recorded += len(changed)
        transaction.on_commit(lambda changed=changed: publish_job_updates(changed))
    return recorded
