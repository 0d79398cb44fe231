"""A sweep's arrays to Slurm, each exactly once: the claim protocol of a job (jobs/tasks.py)
applied to a `JobArray` row.

A worker claims the array with a conditional UPDATE, makes the array's directory and one
directory per task (Slurm opens each task's log there), submits one script for all its tasks
(jobs/submission/batch_script.py with the task table) under the comment `gpupool:<array uuid>`,
and attaches Slurm's id with another conditional UPDATE, which moves its tasks from SUBMITTING
to PENDING. A retry after a lost answer first looks for that comment. A sweep's arrays are
submitted in order, each but the first depending on the one before it (`afterany`), so the
sweep's throttle holds across a sweep split at MaxArraySize.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import timedelta

from celery import shared_task
from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Profile
from cluster.clusters.services import job_paths, rest_client
from cluster.errors import SlurmError, SlurmTransientError
from cluster.files import jobfs
from cluster.records.array_ids import compress_ids
from cluster.records.types import JobSubmission
from groups.queries import require_in_slurm
from jobs.live.events import publish_job_updates
from jobs.models import Job, JobArray, JobState
from jobs.protocol import COMMENT_PREFIX, make_user_directory
from jobs.submission.batch_script import render_batch_script
from jobs.submission.spec import job_spec_from_dict
from jobs.tasks import claim, retry_delay
from sweeps.parameters import Grid, command_for_tasks

log = logging.getLogger(__name__)


def array_comment(array: JobArray) -> str:
    return f"{COMMENT_PREFIX}{array.uuid}"


def array_directory(array: JobArray, cluster_user: str):
    """<job root>/<cluster user>/<array uuid>: the array's working directory; task t writes in <t>/."""
    return job_paths().job_dir(cluster_user) / str(array.uuid)


def task_log_paths(array: JobArray, cluster_user: str, task_id: int) -> tuple[str, str]:
    directory = array_directory(array, cluster_user) / str(task_id)
    return f"{directory}/stdout.log", f"{directory}/stderr.log"


def task_ids_of(array: JobArray) -> list[int]:
    return list(Job.objects.filter(array=array).order_by("array_task_id").values_list("array_task_id", flat=True))


def _claim(array_pk: int) -> bool:
    return claim(JobArray.objects.filter(pk=array_pk, state=JobArray.State.SUBMITTING, slurm_array_job_id__isnull=True))


def build_submission(array: JobArray, task_ids: list[int], *, dependency: str = "") -> JobSubmission:
    sweep = array.sweep
    grid = Grid.from_dict(sweep.grid)
    spec = job_spec_from_dict(sweep.spec)
    spec = replace(spec, command=command_for_tasks(spec.command, grid.names))
    first = Job.objects.filter(array=array).only("cluster_user", "partition", "account", "qos", "tres_per_node")
    task = first.first()
    directory = array_directory(array, task.cluster_user)
    script = render_batch_script(
        spec,
        job_uuid=str(array.uuid),
        runtime=settings.JOB_RUNTIME,
        array_values={task_id: grid.environment(array.offset + task_id) for task_id in task_ids},
        array_offset=array.offset,
    )
    throttle = f"%{sweep.throttle}" if sweep.throttle else ""
    return JobSubmission(
        name=sweep.name,
        script=script,
        working_directory=str(directory),
        standard_output=f"{directory}/%a/stdout.log",
        standard_error=f"{directory}/%a/stderr.log",
        partition=task.partition,
        account=task.account,
        qos=task.qos,
        time_limit_minutes=spec.time_limit_minutes,
        tres_per_node=task.tres_per_node,
        comment=array_comment(array),
        array=compress_ids(task_ids) + throttle,
        dependency=dependency,
    )


# Slurm's refusal of a dependency on a job it no longer holds (ESLURM_DEPENDENCY, "Job dependency problem").
_DEPENDENCY_REFUSED = "dependency"


def submit_array(array_pk: int, *, timeout: float | None = None) -> str:
    """One attempt; SlurmTransientError is raised for the caller to retry. Other outcomes are
    recorded on the array and its tasks."""
    if not _claim(array_pk):
        return "not-claimable"
    array = JobArray.objects.select_related("sweep", "sweep__owner", "depends_on").get(pk=array_pk)
    owner = array.sweep.owner
    if not owner.is_active:
        fail_array(array_pk, "The account was deactivated before the sweep reached Slurm.")
        return "owner-inactive"
    earlier = array.depends_on
    dependency = ""
    if earlier is not None:
        if earlier.slurm_array_job_id is None and earlier.state == JobArray.State.SUBMITTING:
            # Its turn comes after the array before it; released for the next try.
            JobArray.objects.filter(pk=array_pk).update(submit_claimed_until=timezone.now())
            raise SlurmTransientError(f"array {earlier.pk} of the sweep is not in Slurm yet")
        if earlier.slurm_array_job_id:
            dependency = f"afterany:{earlier.slurm_array_job_id}"
    profile = Profile.objects.get(user=owner)
    cluster_user = profile.cluster_username
    client = rest_client(cluster_user)
    if timeout is not None:
        client.timeout = timeout
    try:
        if array.sweep.group_id is not None:
            require_in_slurm(array.sweep.group_id)  # as a job's (jobs/tasks.py)
        if array.submit_attempts > 1:
            existing = client.find_job_by_comment(array_comment(array))
            if existing is not None:
                return _record_accepted(array, existing.array_job_id or existing.job_id, client)
        task_ids = task_ids_of(array)
        make_user_directory(cluster_user, str(array.uuid), profile.cluster_uid, profile.cluster_gid)
        paths = job_paths()
        for task_id in task_ids:
            # Slurm opens each task's log in its directory before the task runs.
            location = paths.user_directory(cluster_user, str(array.uuid), str(task_id))
            jobfs.make_owned_directory(location, uid=profile.cluster_uid, gid=profile.cluster_gid)
        try:
            slurm_id = client.submit_job(build_submission(array, task_ids, dependency=dependency))
        except SlurmError as exc:
            if not dependency or _DEPENDENCY_REFUSED not in exc.message.lower():
                raise
            # slurmctld has forgotten the array before (it ended long ago): nothing to wait for.
            slurm_id = client.submit_job(build_submission(array, task_ids))
        return _record_accepted(array, slurm_id, client)
    except SlurmTransientError:
        raise
    except SlurmError as exc:
        fail_array(array_pk, f"Slurm refused the sweep's array: {exc.public_message}", detail=exc.message)
        return "failed"
    except (OSError, ValueError) as exc:
        fail_array(array_pk, "The sweep's directories could not be prepared.", detail=str(exc))
        return "failed"


def _record_accepted(array: JobArray, slurm_id: int, client) -> str:
    with transaction.atomic():
        attached = JobArray.objects.filter(
            pk=array.pk, state=JobArray.State.SUBMITTING, slurm_array_job_id__isnull=True
        ).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=slurm_id, error="", error_detail="")
        if attached:
            pks = list(Job.objects.filter(array=array, state=JobState.SUBMITTING).values_list("pk", flat=True))
            Job.objects.filter(pk__in=pks).update(state=JobState.PENDING, slurm_states="", error="", error_detail="")
            transaction.on_commit(lambda: publish_job_updates(pks))
            return "submitted"
    current = JobArray.objects.filter(pk=array.pk).values_list("state", flat=True).first()
    if current == JobArray.State.CANCELLED:
        # Cancelled while its submission was on the way: cancel what reached Slurm.
        client.cancel_job(slurm_id)
        return "cancelled"
    log.error("array %s: Slurm array %s accepted but the row is %s", array.pk, slurm_id, current)
    return "orphaned"


def fail_array(array_pk: int, message: str, detail: str = "") -> bool:
    with transaction.atomic():
        updated = JobArray.objects.filter(pk=array_pk, state=JobArray.State.SUBMITTING).update(
            state=JobArray.State.SUBMIT_FAILED,
            error=message[:4000],
            error_detail=detail[:4000],
            submit_claimed_until=None,
        )
        if updated:
            pks = list(Job.objects.filter(array_id=array_pk, state=JobState.SUBMITTING).values_list("pk", flat=True))
            Job.objects.filter(pk__in=pks).update(
                state=JobState.SUBMIT_FAILED, error=message[:4000], error_detail=detail[:4000]
            )
            transaction.on_commit(lambda: publish_job_updates(pks))
    return bool(updated)


def _hold_for_retry(array_pk: int, exc: SlurmTransientError) -> int:
    """Say on the array why it waits, and hold its claim until the retry is due (as a job's:
    jobs.tasks.submit_to_slurm says why). Returns the delay in seconds."""
    attempts = JobArray.objects.filter(pk=array_pk).values_list("submit_attempts", flat=True).first() or 1
    delay = retry_delay(attempts)
    JobArray.objects.filter(pk=array_pk, state=JobArray.State.SUBMITTING).update(
        error=f"{exc.public_message} Retrying in {delay} s (attempt {attempts}).",
        error_detail=exc.message[:4000],
        submit_claimed_until=timezone.now() + timedelta(seconds=delay),
    )
    return delay


# Task names are those the queue's messages carried while sweeps lived in jobs/sweeps/: a message
# queued by the portal before an upgrade is still understood after it.
OLD_PREFIX = "jobs.sweeps.submit."


@shared_task(bind=True, max_retries=None, acks_late=True, name=OLD_PREFIX + "submit_sweep_array")
def submit_sweep_array(self, array_pk: int) -> str:
    try:
        outcome = submit_array(array_pk)
    except SlurmTransientError as exc:
        raise self.retry(exc=exc, countdown=_hold_for_retry(array_pk, exc)) from exc
    if outcome == "submitted":
        # The arrays after it were waiting for it.
        sweep_pk = JobArray.objects.filter(pk=array_pk).values_list("sweep_id", flat=True).first()
        if sweep_pk and JobArray.objects.filter(sweep_id=sweep_pk, state=JobArray.State.SUBMITTING).exists():
            enqueue_sweep(sweep_pk)
    return outcome


def _enqueue(task, argument: int, waiting) -> None:
    """`task.delay(argument)`; with Redis down, the reason goes on the `waiting` arrays, which the
    reconciler sends later."""
    try:
        task.delay(argument)
    except Exception as exc:
        log.warning("could not enqueue %s(%s) (the reconciler will): %s", task.name, argument, exc)
        waiting.filter(state=JobArray.State.SUBMITTING).update(
            error="Queued for submission; the task queue is unavailable. It will be retried.",
            error_detail=str(exc)[:4000],
        )


def enqueue_array(array_pk: int) -> None:
    _enqueue(submit_sweep_array, array_pk, JobArray.objects.filter(pk=array_pk))


def enqueue_sweep(sweep_pk: int) -> None:
    """The sweep's arrays waiting for Slurm, in order (each after the one it depends on)."""
    _enqueue(submit_sweep_arrays, sweep_pk, JobArray.objects.filter(sweep_id=sweep_pk))


@shared_task(ignore_result=True, name=OLD_PREFIX + "submit_sweep_arrays")
def submit_sweep_arrays(sweep_pk: int) -> None:
    """Submit the sweep's waiting arrays one after another; one that meets a transient failure
    (Slurm down) is handed to its own retrying task, and the ones after it wait for it."""
    for array_pk in (
        JobArray.objects.filter(sweep_id=sweep_pk, state=JobArray.State.SUBMITTING)
        .order_by("offset", "pk")
        .values_list("pk", flat=True)
    ):
        try:
            submit_array(array_pk)
        except SlurmTransientError as exc:
            delay = _hold_for_retry(array_pk, exc)
            try:
                submit_sweep_array.apply_async((array_pk,), countdown=delay)
            except Exception as broker_error:  # the reconciler sends it once the claim runs out
                log.warning("could not schedule the retry of sweep array %s: %s", array_pk, broker_error)
            return


@shared_task(ignore_result=True, name=OLD_PREFIX + "reconcile_arrays")
def reconcile_arrays() -> int:
    """Re-enqueue arrays nobody holds: their worker died, or Redis lost the task."""
    now = timezone.now()
    stale = JobArray.objects.filter(
        state=JobArray.State.SUBMITTING,
        slurm_array_job_id__isnull=True,
        created_at__lt=now - timedelta(seconds=10),
    ).filter(Q(submit_claimed_until__isnull=True) | Q(submit_claimed_until__lt=now))
    count = 0
    for array_pk in stale.order_by("pk").values_list("pk", flat=True)[:50]:
        enqueue_array(array_pk)
        count += 1
    return count
