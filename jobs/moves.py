"""The one-time move of a waiting job (docs/clusters.md, "Moving once"): a job the portal
placed (`any`) that still waits may go, once, to a cluster whose scheduler expects to start it
at least JOB_MOVE_MARGIN_MINUTES sooner than its own cluster's expected start.

The steps keep a job from running twice and from being lost:
1. the row's `movable` is cleared by a conditional UPDATE: one move (or one try) per job, ever;
2. the job is held on its cluster (`scontrol hold`), so it cannot start while it moves, and read
   back: a job that started meanwhile stays (released: it had no hold of its own);
3. the row becomes a submission to the new cluster (SUBMITTING, no Slurm id), so that cluster's
   mirror attaches the new Slurm job by its comment, as for any submission, and the old cluster's
   mirror ignores the held job (jobs/mirror/rows.py: a moved job's old Slurm job);
4. the job is submitted there; on any failure the row goes back as it was and the hold is
   released (a submission that reached the new cluster all the same is found by its comment and
   cancelled);
5. the old Slurm job is cancelled; every move, done or not, is in the audit log.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from accounts.models import Profile
from audit.log import record as audit
from cluster.clusters.placement import JobShape, StartEstimate, estimate_where_answering, utc_clock
from cluster.clusters.registry import all_clusters, further_clusters_taking_jobs
from cluster.clusters.services import rest_client, slurm_cli
from cluster.clusters.sync import single_flight
from cluster.errors import SlurmError
from jobs import protocol
from jobs.live.events import publish_job_update
from jobs.models import Job, JobState
from jobs.tasks import CLAIM_SECONDS, identity_on, submission_for

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MoveOutcome:
    outcome: str  # moved, stays, not-movable, no-estimate, started, failed
    detail: str = ""


def waiting_to_move(now: datetime | None = None):
    """Jobs due for a look: placed by the portal, waiting long enough."""
    now = now or timezone.now()
    return Job.objects.filter(
        movable=True,
        state=JobState.PENDING,
        slurm_job_id__isnull=False,
        array__isnull=True,
        created_at__lte=now - timedelta(seconds=settings.JOB_MOVE_AFTER_SECONDS),
    ).order_by("created_at")


def better_elsewhere(job: Job, expected: datetime, now: datetime) -> StartEstimate | None:
    """The other cluster with the earliest estimate, if it beats the job's `expected` start on
    its own cluster by the margin; None otherwise."""
    others = [cluster for cluster in all_clusters() if cluster.name != job.cluster and cluster.offers(job.gpu_type)]
    if not others:
        return None
    shape = JobShape(job.partition, job.tres_per_node, job.time_limit_minutes or 1)
    timed = [estimate for estimate in estimate_where_answering(others, shape) if estimate.start is not None]
    if not timed:
        return None
    best = min(timed, key=lambda estimate: estimate.start)
    current = max(expected, now)
    if max(best.start, now) > current - timedelta(minutes=settings.JOB_MOVE_MARGIN_MINUTES):
        return None
    return best


def consider(job_pk: int, now: datetime | None = None) -> MoveOutcome:
    now = now or timezone.now()
    job = Job.objects.filter(pk=job_pk).first()
    if job is None or not job.movable or job.state != JobState.PENDING or job.slurm_job_id is None:
        return MoveOutcome("not-movable")
    try:
        # Slurm's own expected start now, not the mirror's copy (re-read only now and then).
        current = rest_client(cluster=job.cluster).get_job(job.slurm_job_id)
    except SlurmError as exc:
        return MoveOutcome("no-estimate", str(exc))
    if current.state != JobState.PENDING:
        return MoveOutcome("started", current.state)
    if current.start_time is None:
        return MoveOutcome("no-estimate")
    target = better_elsewhere(job, current.start_time, now)
    if target is None:
        return MoveOutcome("stays")
    return move(job, target, current.start_time, now)


def move(job: Job, target: StartEstimate, expected: datetime, now: datetime) -> MoveOutcome:
    source, old_id = job.cluster, job.slurm_job_id
    claimed = Job.objects.filter(
        pk=job.pk, movable=True, state=JobState.PENDING, cluster=source, slurm_job_id=old_id
    ).update(movable=False)
    if not claimed:
        return MoveOutcome("not-movable")
    facts = {"cluster": source, "slurm_job_id": old_id, "expected_start": expected.isoformat()}
    wanted = {"cluster": target.cluster, "expected_start": target.start.isoformat()}

    def failed(why: str, detail: str = "") -> MoveOutcome:
        audit(None, "job.move", f"job {job.pk}", before=facts, after=wanted, succeeded=False, result=why)
        log.warning("job %s stays on %s: %s %s", job.pk, source, why, detail)
        return MoveOutcome("failed", why)

    source_cli = slurm_cli(source)
    try:
        source_cli.run("scontrol", "hold", str(old_id))
        still = rest_client(cluster=source).get_job(old_id)
    except SlurmError as exc:
        return failed("could not hold it on its cluster", str(exc))
    if still.state != JobState.PENDING:
        source_cli.run("scontrol", "release", str(old_id), check=False)
        return MoveOutcome("started", still.state)

    reason = (
        f"Moved from {source} at {utc_clock(now)}: {target.cluster} expected to start it "
        f"{'now' if target.start <= now else 'at ' + utc_clock(target.start)}, {source} at "
        f"{utc_clock(max(expected, now))}."
    )[:500]
    handed = Job.objects.filter(pk=job.pk, cluster=source, slurm_job_id=old_id, state=JobState.PENDING).update(
        cluster=target.cluster,
        slurm_job_id=None,
        slurm_states="",
        state=JobState.SUBMITTING,
        moved_from=source,
        moved_at=now,
        placement=reason,
        start_time=None,
        end_time=None,
        state_reason="",
        # Held by this move as a worker holds a submission: the reconciler, which re-sends
        # SUBMITTING rows nobody holds, must not submit it a second time meanwhile.
        submit_claimed_until=now + timedelta(seconds=CLAIM_SECONDS),
    )
    if not handed:
        source_cli.run("scontrol", "release", str(old_id), check=False)
        return MoveOutcome("started", "the row moved on")
    job.refresh_from_db()
    try:
        new_id = _submit_there(job)
    except Exception as exc:  # any failure: back as it was, on its cluster, released
        Job.objects.filter(pk=job.pk, cluster=target.cluster, slurm_job_id__isnull=True).update(
            cluster=source,
            slurm_job_id=old_id,
            state=JobState.PENDING,
            moved_from="",
            moved_at=None,
            start_time=expected,
            submit_claimed_until=None,
        )
        _cancel_a_lost_submission(job, target.cluster)
        source_cli.run("scontrol", "release", str(old_id), check=False)
        return failed("the other cluster did not take it", f"{type(exc).__name__}: {exc}")
    protocol.attach_slurm_job(job.pk, new_id)
    try:
        rest_client(cluster=source).cancel_job(old_id)
    except SlurmError as exc:  # held, it cannot run: an admin sees it in the audit log
        log.warning("job %s moved; its old Slurm job %s on %s stays held: %s", job.pk, old_id, source, exc)
    audit(
        None,
        "job.move",
        f"job {job.pk}",
        before=facts,
        after={**wanted, "slurm_job_id": new_id},
        result=reason,
    )
    transaction.on_commit(lambda: publish_job_update(job.pk))
    return MoveOutcome("moved", reason)


def _submit_there(job: Job) -> int:
    """The submission path of jobs/tasks.py for the row as it is now (on its new cluster)."""
    profile = Profile.objects.get(user_id=job.owner_id)
    uid, gid = identity_on(job.cluster, profile)
    protocol.prepare_job_directory(job, uid, gid)
    return rest_client(job.cluster_user, cluster=job.cluster).submit_job(submission_for(job))


def _cancel_a_lost_submission(job: Job, cluster: str) -> None:
    try:
        client = rest_client(job.cluster_user, cluster=cluster)
        found = client.find_job_by_comment(protocol.slurm_comment(job))
        if found is not None:
            client.cancel_job(found.job_id)
    except SlurmError as exc:
        log.warning("job %s: could not look for a submission on %s after a failed move: %s", job.pk, cluster, exc)


@shared_task(ignore_result=True)
def move_waiting_jobs() -> dict:
    """Beat: jobs placed by the portal that still wait, a few a pass in random order (those that
    stay are looked at again later), each moved once where it would start sooner. Registered
    through CELERY_IMPORTS: jobs.tasks, which this module builds on, never imports it."""
    if not further_clusters_taking_jobs():
        return {}
    outcomes: dict[str, int] = {}
    with single_flight("move_waiting_jobs", timeout=600) as acquired:
        if not acquired:
            return outcomes
        for job_pk in waiting_to_move().order_by("?").values_list("pk", flat=True)[: settings.JOB_MOVES_PER_PASS]:
            outcome = consider(job_pk).outcome
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
    return outcomes
