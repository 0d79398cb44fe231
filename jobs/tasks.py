"""Celery tasks for jobs. Each takes a row id, re-reads the row, acts only if the row is
still in the state the task is for, and records failures on the row."""

from __future__ import annotations

import logging
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db.models import F, Q
from django.utils import timezone

from accounts.actions import provision_on_cluster
from accounts.models import Profile
from cluster.actions import further_nodes
from cluster.clusters.registry import further_clusters_taking_jobs, primary_cluster_name
from cluster.clusters.services import rest_client, slurm_cli
from cluster.clusters.sync import record_run, single_flight, sync_nodes_if_due
from cluster.errors import SlurmError, SlurmTransientError
from cluster.models import ClusterStatus
from cluster.records.types import JobSubmission
from datasets.actions import node_cache
from datasets.tasks import sync_all_node_features
from groups.queries import require_in_slurm
from jobs import container_starts, dataset_staging, protocol
from jobs.mirror.arrays import record_array_accounting
from jobs.mirror.passes import ListingMemo, mirror_jobs, record_missing_accounting
from jobs.models import Job, JobState
from jobs.submission.batch_script import render_batch_script
from jobs.submission.environment import submission_environment
from jobs.submission.spec import job_spec_from_dict

log = logging.getLogger(__name__)
# The beat's passes look up only the jobs whose listed state changed (every row each
# FULL_CHECK_SECONDS): this process's memo of what they left in step.
BEAT_MEMO = ListingMemo()
# How long a worker owns a submission before another may try (longer than any one try).
CLAIM_SECONDS = 120


def claimed_for_inline_submission() -> dict:
    """The fields of a row created already claimed by the request that will submit it
    (jobs.actions.submit with SUBMIT_INLINE): what _claim's UPDATE would set, without its commit."""
    return {"submit_claimed_until": timezone.now() + timedelta(seconds=CLAIM_SECONDS), "submit_attempts": 1}


def claim(rows) -> bool:
    """Take the submission of `rows` (one row waiting for Slurm: a Job, or a sweep's JobArray)
    for CLAIM_SECONDS, unless another worker holds it: one conditional UPDATE."""
    now = timezone.now()
    return bool(
        rows.filter(Q(submit_claimed_until__isnull=True) | Q(submit_claimed_until__lt=now)).update(
            submit_claimed_until=now + timedelta(seconds=CLAIM_SECONDS), submit_attempts=F("submit_attempts") + 1
        )
    )


def retry_delay(attempts: int) -> int:
    """Seconds before a submission's next try after `attempts` transient failures."""
    return min(settings.SUBMIT_RETRY_MAX_SECONDS, 2 ** min(attempts, 16))


def _claim(job_pk: int) -> bool:
    # A sweep's task reaches Slurm with its array (sweeps/submit.py), never alone.
    return claim(
        Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING, slurm_job_id__isnull=True, array__isnull=True)
    )


def submission_for(job: Job, *, prefer: str = "") -> JobSubmission:
    directory = protocol.job_directory(job)
    standard_output, standard_error = protocol.log_paths(job)
    common = {
        "name": job.name,
        "working_directory": str(directory),
        "standard_output": standard_output,
        "standard_error": standard_error,
        "partition": job.partition,
        "account": job.account,
        "time_limit_minutes": job.time_limit_minutes,
        "tres_per_node": job.tres_per_node,
        "comment": protocol.slurm_comment(job),
    }
    if job.pinned:
        # An operational job: the portal's own script on one node (jobs.actions.create_pinned_job).
        return JobSubmission(
            **common,
            script=job.pinned["script"],
            required_nodes=(job.pinned["node"],),
            reservation=job.pinned.get("reservation", ""),
            requeue=False,
        )
    # As accepted (validated then, under the plan of then): not re-validated against today's plan.
    spec = job_spec_from_dict(job.spec)
    return JobSubmission(
        **common,
        script=render_batch_script(spec, job_uuid=str(job.uuid), runtime=settings.JOB_RUNTIME),
        environment=submission_environment(job),
        qos=job.qos,
        prefer=prefer,
        # In the owner's reservation (jobs.actions.submit checked it) it starts on its GPUs.
        reservation=job.reservation.slurm_name if job.reservation_id else "",
        requeue=True,
    )


def _record_accepted(job: Job, slurm_job_id: int, client) -> str:
    # The instance is brought up to date: the API answers with it, without a re-read.
    if protocol.attach_slurm_job(job.pk, slurm_job_id, job=job):
        return "submitted"
    job.refresh_from_db()
    if job.slurm_job_id == slurm_job_id:
        return "submitted"  # the mirror saw it first
    owner_gone = not get_user_model().objects.filter(pk=job.owner_id, is_active=True).exists()
    if job.state == JobState.CANCELLED or (job.state == JobState.SUBMIT_FAILED and owner_gone):
        # Cancelled, or its owner deactivated, while the submission was on its way.
        client.cancel_job(slurm_job_id)
        return "cancelled"
    log.error("job %s: Slurm job %s accepted but the row is %s", job.pk, slurm_job_id, job.state)
    return "orphaned"


class HandOver(Exception):
    """The inline attempt cannot do this part here (no rights on the job directory): the row's
    claim is released and a worker does it."""


def submit_claimed(job_pk: int, *, timeout: float | None = None, inline: bool = False) -> str:
    """One submission attempt of a SUBMITTING row: claim it, submit it with its comment,
    attach the Slurm id. Every outcome but a transient failure is recorded on the row;
    SlurmTransientError is raised for the caller to retry (or give up on). `inline`: the web
    request's own attempt (`submit_now`), which hands a directory it cannot prepare to a
    worker (HandOver) instead of failing the job."""
    if not _claim(job_pk):
        return "not-claimable"  # submitted already, cancelled, or another worker holds it
    job = Job.objects.select_related("owner", "reservation").get(pk=job_pk)
    if job.owner is None or not job.owner.is_active:
        protocol.fail_submission(job_pk, "The account was deactivated before the job reached Slurm.")
        return "owner-inactive"
    return _submit_held(job, Profile.objects.get(user_id=job.owner_id), timeout=timeout, inline=inline)


def _submit_held(job: Job, profile: Profile, *, timeout: float | None, inline: bool) -> str:
    """submit_claimed's part once the row is claimed by the caller and loaded."""
    job_pk = job.pk
    client = rest_client(job.cluster_user, cluster=job.cluster)
    if timeout is not None:
        client.timeout = timeout
    try:
        if job.group_id is not None:
            # Slurm would refuse a group job before it holds the group's newest allocation or members.
            require_in_slurm(job.group_id)
        if job.submit_attempts > 1:
            # An earlier try may have reached Slurm and lost the answer: never submit twice.
            existing = client.find_job_by_comment(protocol.slurm_comment(job))
            if existing is not None:
                return _record_accepted(job, existing.job_id, client)
        try:
            uid, gid = identity_on(job.cluster, profile)
        except SlurmTransientError:
            raise
        except (SlurmError, OSError, ValueError) as exc:
            protocol.fail_submission(
                job_pk,
                f"Your account on cluster {job.cluster} could not be set up; an admin can see why.",
                detail=str(exc),
            )
            return "failed"
        try:
            protocol.prepare_job_directory(job, uid, gid)
        except PermissionError as exc:
            if inline:
                raise HandOver(str(exc)) from exc
            raise
        slurm_job_id = _submit_with_datasets(job, client)
        return _record_accepted(job, slurm_job_id, client)
    except SlurmTransientError:
        raise
    except SlurmError as exc:
        protocol.fail_submission(job_pk, f"Slurm refused the job: {exc.public_message}", detail=exc.message)
        return "failed"
    except (OSError, ValueError) as exc:
        protocol.fail_submission(job_pk, "The job's directory could not be prepared.", detail=str(exc))
        return "failed"


def identity_on(cluster: str, profile: Profile) -> tuple[int | None, int | None]:
    """The user's uid and gid on the job's cluster: the profile's on the portal's own, the
    further cluster's account otherwise (made there on the user's first job)."""
    if cluster == primary_cluster_name():
        return profile.cluster_uid, profile.cluster_gid
    account = provision_on_cluster(profile, cluster)
    return account.uid, account.gid


# Slurm's answer to a `--prefer` naming a feature no node has (error 2133 on 24.11 and 26.05).
_UNKNOWN_PREFERENCE = "preferred feature"


def _submit_with_datasets(job: Job, client) -> int:
    """Submit; a job that mounts datasets first gets its grant (what the node tool may stage for
    it) and prefers a node that holds its largest version. A preference Slurm no longer knows
    (its features were reset by a restart) is dropped, and the node features put back."""
    mounts = list(job.datasets.select_related("version"))
    if not mounts:
        return client.submit_job(submission_for(job))
    node_cache.write_grant(job.uuid, job.cluster_user, [(mount.version, mount.name) for mount in mounts])
    prefer = node_cache.prefer_for(mount.version_id for mount in mounts) if settings.DATASET_PLACEMENT else ""
    try:
        return client.submit_job(submission_for(job, prefer=prefer))
    except SlurmError as exc:
        if not prefer or _UNKNOWN_PREFERENCE not in exc.message.lower():
            raise
    log.info("job %s: Slurm knows no node with %s; submitted without the preference", job.pk, prefer)
    sync_all_node_features.delay()
    return client.submit_job(submission_for(job))


@shared_task(bind=True, max_retries=None, acks_late=True)
def submit_to_slurm(self, job_pk: int) -> str:
    try:
        return submit_claimed(job_pk)
    except SlurmTransientError as exc:
        attempts = Job.objects.filter(pk=job_pk).values_list("submit_attempts", flat=True).first() or 1
        delay = retry_delay(attempts)
        # The row stays claimed by this retry until it is due, so the reconciler re-sends only a
        # submission nobody holds (its worker died, its retry was lost with Redis). Released here,
        # every reconciler pass started another retry chain while Slurm was down, each retrying
        # for ever: 18 attempts per job in 3 minutes (bench/fault_rehearsal.py). At the retry's
        # time the claim has just run out, so the retry takes it again, and of a retry and a
        # reconciler's task arriving together one claims and the other ends.
        Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING).update(
            error=f"{exc.public_message} Retrying in {delay} s (attempt {attempts}).",
            error_detail=exc.message[:4000],
            submit_claimed_until=timezone.now() + timedelta(seconds=delay),
        )
        raise self.retry(exc=exc, countdown=delay) from exc


def submit_now(job: Job, profile: Profile) -> bool:
    """The web request's own attempt, right after its transaction committed the row already
    claimed (claimed_for_inline_submission): the job is in Slurm when the API answers, without
    a worker's pick-up in between (the submit path against sbatch). `job` and
    `profile` are the request's own, just written, so nothing is read again. Anything short of
    success hands the row to a worker, as every submission was before: a transient failure
    (slurmrestd slow or down, within a short timeout), a job directory this process may not
    chown, any error. The claim keeps the two from ever submitting the same row twice. True
    when the job is in Slurm (and its owner was told; `job` then carries its Slurm id)."""
    job_pk = job.pk
    try:
        outcome = _submit_held(job, profile, timeout=settings.SUBMIT_INLINE_TIMEOUT_SECONDS, inline=True)
        return outcome == "submitted"
    except SlurmTransientError as exc:
        log.info("job %s: inline submission handed to a worker: %s", job_pk, exc)
        # Said on the row at once (the page and the API show it), not only after a worker's try.
        failure = {"error": f"{exc.public_message} Retrying shortly.", "error_detail": exc.message[:4000]}
    except HandOver as exc:
        log.info("job %s: inline submission handed to a worker: %s", job_pk, exc)
        failure = {}
    except Exception:
        log.exception("job %s: inline submission failed; a worker takes it", job_pk)
        failure = {}
    Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING, slurm_job_id__isnull=True).update(
        submit_claimed_until=None, **failure
    )
    enqueue_submission(job_pk)
    return False


@shared_task(ignore_result=True)
def reconcile_submissions() -> int:
    """Re-enqueue submissions nobody holds: their worker died, or Redis lost the task."""
    now = timezone.now()
    stale = Job.objects.filter(
        state=JobState.SUBMITTING,
        slurm_job_id__isnull=True,
        array__isnull=True,
        owner__is_active=True,
        created_at__lt=now - timedelta(seconds=10),
    ).filter(Q(submit_claimed_until__isnull=True) | Q(submit_claimed_until__lt=now))
    count = 0
    for job_pk in stale.values_list("pk", flat=True)[:200]:
        enqueue_submission(job_pk)
        count += 1
    return count


def enqueue_submission(job_pk: int) -> None:
    try:
        submit_to_slurm.delay(job_pk)
    except Exception as exc:  # Redis down: the row waits in SUBMITTING for the reconciler
        log.warning("could not enqueue the submission of job %s (the reconciler will): %s", job_pk, exc)
        Job.objects.filter(pk=job_pk, state=JobState.SUBMITTING).update(
            error="Queued for submission; the task queue is unavailable. It will be retried.",
            error_detail=str(exc)[:4000],
        )


# --- the mirror: Slurm's jobs copied into the portal ------------------------------------------
def record_run_safely(name: str, started, *, error: str) -> None:
    """record_run for a failed pass; what made the pass fail (the database) may fail this too."""
    try:
        record_run(name, started, error=error)
    except Exception:
        log.exception("could not record the failure of the %s pass", name)


def run_sync() -> dict:
    """One mirror pass (jobs, then nodes when due); what the beat task and `manage.py
    cluster_sync` run."""
    client = rest_client()
    outcome: dict = {}
    started = timezone.now()
    try:
        result = mirror_jobs(client, queue=slurm_cli(), memo=BEAT_MEMO)
        outcome["jobs"] = result.__dict__
        record_run("jobs", started, summary=f"{result.seen} jobs in Slurm, {result.changed} changed")
    except SlurmError as exc:
        log.warning("job mirror failed: %s", exc)
        record_run_safely("jobs", started, error=str(exc))
        outcome["jobs_error"] = str(exc)
    except Exception as exc:
        # Not only Slurm fails: a locked database or a bug stops a pass too, and admins must
        # see it on the console, not only in the worker's log. The next pass tries again.
        log.exception("job mirror pass failed")
        error = f"{type(exc).__name__}: {exc}"
        record_run_safely("jobs", started, error=error)
        outcome["jobs_error"] = error
    try:
        outcome.update(sync_nodes_if_due(client, started))
    except Exception as exc:
        log.exception("node mirror pass failed")
        record_run_safely("nodes", started, error=f"{type(exc).__name__}: {exc}")
        outcome["nodes_error"] = str(exc)
    return outcome


@shared_task(ignore_result=True)
def sync_cluster() -> dict | None:
    with single_flight("sync_cluster") as acquired:
        if not acquired:
            return None
        return run_sync()


# Each further cluster's passes remember their listing as the portal's own do (BEAT_MEMO).
_FURTHER_MEMOS: dict[str, ListingMemo] = {}


def further_clusters_to_mirror() -> list[str]:
    """The further clusters that take portal jobs and answer: one not answering is left to its
    probe (cluster/clusters/probing.py), which says when it is back; its pass then catches up."""
    further = [cluster.name for cluster in further_clusters_taking_jobs()]
    if not further:
        return []
    silent = set(ClusterStatus.objects.filter(answering=False, checked_at__isnull=False).values_list("name", flat=True))
    return [name for name in further if name not in silent]


def run_further_sync(cluster: str) -> dict:
    """One mirror pass over a further cluster's jobs, with their accounting, recorded on the
    `jobs:<cluster>` SyncRun row. Its events are not wired: polling alone keeps it current."""
    started = timezone.now()
    name = f"jobs:{cluster}"
    try:
        client = rest_client(cluster=cluster)
        memo = _FURTHER_MEMOS.setdefault(cluster, ListingMemo())
        result = mirror_jobs(client, queue=slurm_cli(cluster), memo=memo, cluster=cluster)
        recorded = record_missing_accounting(client, cluster=cluster)
        further_nodes.snapshot_if_due(cluster, client)  # what the heatmap shows of it
    except Exception as exc:
        log.warning("mirror of cluster %s failed: %s", cluster, exc)
        record_run_safely(name, started, error=f"{type(exc).__name__}: {exc}")
        return {"error": str(exc)}
    record_run(name, started, summary=f"{result.seen} jobs in Slurm, {result.changed} changed, {recorded} accounted")
    return result.__dict__


@shared_task(ignore_result=True)
def sync_further_clusters() -> dict:
    """Beat: each further cluster's pass, one at a time per cluster across workers."""
    outcome = {}
    for cluster in further_clusters_to_mirror():
        with single_flight(f"sync_cluster:{cluster}") as acquired:
            if acquired:
                outcome[cluster] = run_further_sync(cluster)
    return outcome


@shared_task(ignore_result=True)
def sync_accounting() -> int | None:
    """Copy slurmdbd's figures onto finished jobs. Its own task: slurmdbd answers in tenths
    of a second, and the state mirror must not wait for it."""
    with single_flight("sync_accounting", timeout=300) as acquired:
        if not acquired:
            return None
        started = timezone.now()
        try:
            client = rest_client()
            recorded = record_missing_accounting(client) + record_array_accounting(client)
        except SlurmError as exc:
            log.warning("accounting sync failed: %s", exc)
            record_run_safely("accounting", started, error=str(exc))
            return None
        except Exception as exc:
            log.exception("accounting sync failed")
            record_run_safely("accounting", started, error=f"{type(exc).__name__}: {exc}")
            return None
        record_run("accounting", started, summary=f"{recorded} finished jobs given their accounting")
        return recorded


@shared_task(ignore_result=True)
def record_container_start(job_pk: int) -> None:
    """Off the mirror's thread: reading a job's stderr may meet a slow file system."""
    container_starts.record_container_start(job_pk)


# A job's datasets are followed every few seconds while they are staged (the page's progress bar),
# at most this long; the job's end reads them once more.
STAGING_POLL_SECONDS = 3
STAGING_POLL_ROUNDS = 1200


@shared_task(bind=True, ignore_result=True)
def follow_dataset_staging(self, job_pk: int, rounds: int = 0) -> None:
    """Read the staging lines of a running job (jobs/dataset_staging.py) until every version is
    on its node. Idempotent; a duplicate chain only reads the same lines again. Run eagerly (a
    test's), it reads once: a countdown would not wait there."""
    if dataset_staging.record_staging(job_pk) or rounds >= STAGING_POLL_ROUNDS or self.request.is_eager:
        return
    follow_dataset_staging.apply_async((job_pk, rounds + 1), countdown=STAGING_POLL_SECONDS)
