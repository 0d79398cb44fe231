"""Writing what Slurm says of jobs into Job rows: one job in full (`apply_slurm_job`), a
burst of jobs from outside the portal in one INSERT, jobs that ended without starting from the
state listing alone, and jobs slurmctld forgot from slurmdbd's record.

Every write is a conditional UPDATE on the state string read, so two writers racing (a mirror
pass, an event from slurmctld's hooks) never overwrite a newer state with an older one, and a
write repeated changes nothing. Each change is pushed to the owner's pages on commit.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import UTC, datetime

from django.contrib.auth import get_user_model
from django.db import IntegrityError, connection, transaction
from django.utils import timezone

import foundation.lookups  # noqa: F401  (registers __any_of)
from cluster.clusters.registry import primary_cluster_name
from cluster.clusters.services import rest_client
from cluster.errors import SlurmError, SlurmNotFound
from cluster.records.gres import gpus_allocated, gpus_held, requested_quota
from cluster.records.types import TERMINAL_JOB_STATES, AccountingRecord
from cluster.records.types import Job as SlurmJob
from cluster.slurmrest.client import SlurmRestClient
from foundation.sequences import batches
from groups.queries import group_ids_for_accounts
from jobs.live.events import publish_job_update, publish_job_updates
from jobs.models import FINAL_STATES, UNREAD_OR_UNFINISHED, Job, JobState
from jobs.protocol import COMMENT_PREFIX, portal_uuid_of

log = logging.getLogger(__name__)
# Rows written this many at a time (small transactions never hold others' updates long).
WRITE_BATCH = 500


def _cancel_orphan(job: SlurmJob) -> None:
    try:
        rest_client(job.user_name).cancel_job(job.job_id)
    except SlurmError as exc:
        log.warning("could not cancel orphaned Slurm job %s: %s", job.job_id, exc)


def state_signature(states: tuple[str, ...]) -> str:
    return ",".join(states)


def portal_state(state: str) -> str:
    return state if state in JobState.values else JobState.UNKNOWN


# Slurm says RUNNING, flagged CONFIGURING, while the job's nodes boot (a powered-down node being
# resumed: up to its ResumeTimeout): nothing of the job runs yet, and its start time is provisional.
BOOTING_REASON = "starting: node booting"


def _booting(job: SlurmJob) -> bool:
    return job.state == JobState.RUNNING and "CONFIGURING" in job.states


def _fields_from_slurm(job: SlurmJob) -> dict:
    if _booting(job):
        # Shown as waiting, its start as the expected one: RUNNING (and a cost ticking) only once
        # Slurm has started it. The state signature keeps the flag, so the start is a change.
        return {**_slurm_fields(job), "state": JobState.PENDING, "state_reason": BOOTING_REASON}
    return _slurm_fields(job)


def _slurm_fields(job: SlurmJob) -> dict:
    return {
        "name": job.name[:200],
        "cluster_user": job.user_name,
        "account": job.account,
        "partition": job.partition,
        "qos": job.qos,
        "state": portal_state(job.state),
        "slurm_states": state_signature(job.states)[:200],
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


def _row(cluster: str | None = None, **lookup) -> dict | None:
    return Job.objects.on_cluster(cluster).filter(**lookup).values("pk", "cluster_user", *WATCHED_FIELDS).first()


def apply_slurm_job(job: SlurmJob, cluster: str | None = None) -> bool:
    """Record what Slurm says of one job of `cluster` (the portal's own by default). Returns
    True when the row changed."""
    fields = _fields_from_slurm(job)
    row = _row(cluster, slurm_job_id=job.job_id)
    portal_uuid = None
    if row is None and job.comment.startswith(COMMENT_PREFIX):
        portal_uuid = portal_uuid_of(job.comment)
        # Only a row submitted to this cluster: a comment copied to another cluster claims nothing.
        portal = (
            Job.objects.on_cluster(cluster)
            .filter(uuid=portal_uuid)
            .values("pk", "state", "slurm_job_id", "cluster_user")
            .first()
            if portal_uuid
            else None
        )
        if (
            portal is None
            and portal_uuid
            and Job.objects.filter(uuid=portal_uuid, moved_from=cluster or primary_cluster_name()).exists()
        ):
            # The Slurm job a moved job left behind (held, then cancelled: jobs/moves.py): the
            # portal's job is the one on its new cluster, and this one is no job of its own.
            return False
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
                row = _row(cluster, pk=portal["pk"])
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
                # The portal's own job whose row is gone (a database restored from a backup older
                # than the job) comes back under its portal id; an id a row holds is not taken.
                lost_own = portal_uuid is not None and not Job.objects.filter(uuid=portal_uuid).exists()
                created = Job.objects.create(
                    cluster=cluster or primary_cluster_name(),
                    slurm_job_id=job.job_id,
                    owner_id=_owner_id_for(job.user_name),
                    group_id=group_ids_for_accounts({job.account}).get(job.account),
                    gpu_type=gpu_type,
                    quota_gpus=gpus,
                    quota_shards=shards,
                    **fields,
                    **({"uuid": portal_uuid} if lost_own else {}),
                )
        except IntegrityError:
            # Another pass created it first; fall through to the conditional update.
            row = _row(cluster, slurm_job_id=job.job_id)
        else:
            transaction.on_commit(lambda: publish_job_update(created.pk))
            return True
    settle_allocation(job, fields, row)
    same_user = row["cluster_user"] == fields["cluster_user"]
    if same_user and all(row[name] == fields[name] for name in WATCHED_FIELDS):
        return False
    if not same_user:
        # The row's user came from a bulk read (cluster/commands/queue.py) and slurmrestd names another:
        # slurmrestd's word stands, and the job counts toward that user's quota.
        fields["owner_id"] = _owner_id_for(fields["cluster_user"])
    updated = Job.objects.filter(pk=row["pk"], slurm_states=row["slurm_states"]).update(**fields)
    if updated:
        transaction.on_commit(lambda: publish_job_update(row["pk"]))
    return bool(updated)


def settle_allocation(job: SlurmJob, fields: dict, row: dict) -> None:
    """Complete `fields` (what Slurm says of a job) with what its row knows and Slurm forgets
    once it ended, then count the GPUs of its allocation (`gpu_count`, once Slurm allocated any)."""
    if job.is_terminal and not fields["gpu_allocation"] and row["gpu_allocation"]:
        # slurmctld forgets which GPUs an ended job held (its gres_detail is empty); billing
        # attributes those GPUs' telemetry to the run, so the last allocation stays.
        fields["gpu_allocation"] = row["gpu_allocation"]
    if job.is_terminal and not fields["nodes"] and row["nodes"]:
        # Seen on 24.11 (v0.0.41 and v0.0.42 alike): a job just COMPLETED briefly reports no
        # nodes, then its nodes again. Where it ran does not change once it has ended.
        fields["nodes"] = row["nodes"]
    allocated = gpus_allocated(fields["allocated_tres"], fields["gpu_allocation"])
    if allocated is not None:
        fields["gpu_count"] = allocated


def accounting_usage(record: AccountingRecord) -> dict:
    """What slurmdbd's record of a finished run settles on the row: its elapsed time, and the
    whole GPUs it held (a job on shards keeps the count the mirror took from its allocation,
    which slurmdbd's record does not name), and the CPU time and memory peak jobacct_gather took."""
    whole = {"gpu_count": record.gpu_count} if record.gpu_count else {}
    host = {"cpu_seconds": record.cpu_seconds} if record.cpu_seconds is not None else {}
    if record.max_rss_bytes:
        host["host_memory_peak_mb"] = -(-record.max_rss_bytes // 2**20)
    return {"elapsed_seconds": record.elapsed_seconds, **whole, **host}


def finish_from_accounting(client: SlurmRestClient, job_pk: int, slurm_job_id: int, old_signature: str) -> bool:
    try:
        record = client.get_accounting(slurm_job_id)
    except SlurmNotFound:
        return False
    usage = accounting_usage(record) if record.is_settled else {}
    updated = Job.objects.filter(pk=job_pk, slurm_states=old_signature).update(
        state=portal_state(record.state),
        slurm_states=state_signature(record.states),
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


def create_outside_jobs(jobs: list[SlurmJob], cluster: str | None = None) -> int:
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
    groups = group_ids_for_accounts({job.account for job in jobs})
    rows = []
    for job in jobs:
        gpu_type, gpus, shards = requested_quota(job.tres_per_node)
        rows.append(
            Job(
                cluster=cluster or primary_cluster_name(),
                slurm_job_id=job.job_id,
                owner_id=owners.get(job.user_name),
                group_id=groups.get(job.account),
                gpu_type=gpu_type,
                quota_gpus=gpus,
                quota_shards=shards,
                gpu_count=gpus_held(job.allocated_tres, job.gpu_allocation, job.tres_per_node),
                **_fields_from_slurm(job),
            )
        )
    ids = [job.job_id for job in jobs]
    with transaction.atomic():
        own = Job.objects.on_cluster(cluster)
        before = set(own.filter(slurm_job_id__any_of=ids).values_list("slurm_job_id", flat=True))
        # A job another pass created meanwhile is left to it (the unique Slurm id).
        Job.objects.bulk_create([row for row in rows if row.slurm_job_id not in before], ignore_conflicts=True)
        new_pks = list(
            own.filter(slurm_job_id__any_of=[i for i in ids if i not in before]).values_list("pk", flat=True)
        )
        transaction.on_commit(lambda: publish_job_updates(new_pks))
    return len(new_pks)


def finish_vanished_job(client: SlurmRestClient, slurm_job_id: int, cluster: str | None = None) -> bool:
    """A job slurmctld no longer has, if the portal still has it unfinished: its end from
    slurmdbd. True when the row changed."""
    row = (
        # An array's task is finished with its array (jobs/mirror/arrays.py).
        Job.objects.on_cluster(cluster)
        .filter(UNREAD_OR_UNFINISHED, slurm_job_id=slurm_job_id, array__isnull=True)
        .values_list("pk", "slurm_states")
        .first()
    )
    if row is None:
        return False
    return finish_from_accounting(client, row[0], slurm_job_id, row[1])


def apply_from_listing(rows: dict[int, dict], live: dict[int, str], job_ids: list[int]) -> list[int]:
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
        state = portal_state(new_signature.split(",")[0])
        for batch in batches(pks, WRITE_BATCH):
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


def apply_told_endings(
    endings: dict[int, tuple[str, int | None]], cluster: str | None = None
) -> tuple[list[int], set[int]]:
    """What slurmctld's completion hook said of jobs ending (job id -> state, when it ended),
    written at once, before anything is read back from Slurm (jobs/slurm_events/receiving.py).

    A pending job cancelled (the bulk of a mass scancel) has nothing more to tell, so its row is
    written whole, Slurm's signature included, by the rule the listing uses (apply_from_listing):
    the next listing finds it in step and reads nothing. Any other ending gets its state and end
    now and an empty signature, which no listing has: the next read by id or listing fetches its
    exit code and the rest, and writes Slurm's word if it has moved on since (a requeued job
    running again when a delayed event arrives). The spool the hook writes is SlurmUser's alone
    and the batch is signed. Returns the portal ids written, committed and not yet pushed to
    their owners' pages (the caller does, publish_job_updates, once it has answered the events),
    and the Slurm ids fully settled."""
    written: list[int] = []
    settled: set[int] = set()
    groups: dict[tuple[str, int | None], list[int]] = defaultdict(list)
    for job_id, (state, ended) in endings.items():
        if state in TERMINAL_JOB_STATES:
            groups[(state, ended)].append(job_id)
    for (state, ended), job_ids in groups.items():
        end_time = datetime.fromtimestamp(ended, tz=UTC) if ended else timezone.now()
        for batch in batches(job_ids, WRITE_BATCH):
            pks, fully = _write_told_ending(batch, state, end_time, cluster or primary_cluster_name())
            written += pks
            settled |= fully
    return written, settled


# The portal's final states, in a fixed order for the statement's parameters.
_FINAL = sorted(FINAL_STATES)


def _write_told_ending(job_ids: list[int], state: str, end_time: datetime, cluster: str) -> tuple[list[int], set[int]]:
    """Two conditional UPDATEs that say which rows they wrote (RETURNING, PostgreSQL and
    SQLite alike): one statement a kind of row, where reading the rows first and writing them
    after took three, and a mass cancel's batches wait on each other's answers. A row another
    writer holds (a listing pass writing the same end) is skipped, never waited for."""
    quote = connection.ops.quote_name
    table = quote(Job._meta.db_table)
    skip_locked = " FOR UPDATE SKIP LOCKED" if connection.features.has_select_for_update_skip_locked else ""
    # The mirror reads an array's tasks per array (jobs/mirror/arrays.py): left to it.
    ours = (
        f"{quote('cluster')} = %s AND {quote('slurm_job_id')} IN ({', '.join(['%s'] * len(job_ids))})"
        f" AND {quote('array_id')} IS NULL"
    )
    when, now = (connection.ops.adapt_datetimefield_value(value) for value in (end_time, timezone.now()))
    whole: list[tuple[int, int]] = []
    with connection.cursor() as cursor:
        if state == JobState.CANCELLED:
            cursor.execute(
                f"UPDATE {table} SET state = %s, slurm_states = %s, state_reason = '', end_time = %s, updated_at = %s"
                f" WHERE id IN (SELECT id FROM {table} WHERE {ours} AND state = %s AND start_time IS NULL{skip_locked})"
                " RETURNING id, slurm_job_id",
                [state, state, when, now, cluster, *job_ids, JobState.PENDING],
            )
            whole = cursor.fetchall()
        cursor.execute(
            f"UPDATE {table} SET state = %s, slurm_states = '', end_time = %s, updated_at = %s"
            f" WHERE id IN (SELECT id FROM {table} WHERE {ours}"
            f" AND state NOT IN ({', '.join(['%s'] * len(_FINAL))}){skip_locked}) RETURNING id",
            [state, when, now, cluster, *job_ids, *_FINAL],
        )
        read_again = [pk for (pk,) in cursor.fetchall()]
    return [pk for pk, _ in whole] + read_again, {job_id for _, job_id in whole}


# What a pending job's re-read may change without a change of state: why it waits, and when
# Slurm now expects it to start and end.
PENDING_ESTIMATE_FIELDS = ("state_reason", "start_time", "end_time")


def apply_pending_estimates(jobs: list[SlurmJob], cluster: str | None = None) -> tuple[list[int], list[int]]:
    """Pending jobs re-read in bulk (squeue, cluster/commands/queue.py) for their expected start: only
    those fields are written (squeue has no output paths, and its record of a job the portal
    submitted is not the whole job), on rows still pending with the same signature. Returns the
    Slurm ids written and those found unchanged."""
    if not jobs:
        return [], []
    rows = {
        row["slurm_job_id"]: row
        for row in Job.objects.on_cluster(cluster)
        .filter(slurm_job_id__any_of=[job.job_id for job in jobs], state=JobState.PENDING, array__isnull=True)
        .values("pk", "slurm_job_id", "slurm_states", *PENDING_ESTIMATE_FIELDS)
    }
    written, unchanged = [], []
    for job in jobs:
        row = rows.get(job.job_id)
        if row is None or row["slurm_states"] != state_signature(job.states):
            continue  # moved on meanwhile: the next pass reads it in full
        fields = {name: value for name, value in _fields_from_slurm(job).items() if name in PENDING_ESTIMATE_FIELDS}
        if all(row[name] == fields[name] for name in PENDING_ESTIMATE_FIELDS):
            unchanged.append(job.job_id)
            continue
        if Job.objects.filter(pk=row["pk"], slurm_states=row["slurm_states"]).update(
            **fields, updated_at=timezone.now()
        ):
            written.append(row["pk"])
    if written:
        transaction.on_commit(lambda: publish_job_updates(written))
    return [job_id for job_id, row in rows.items() if row["pk"] in written], unchanged
