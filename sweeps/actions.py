"""Writes about sweeps: accept one, steer it (throttle, cancel), rerun points, clone it.
Every one is checked against the plan like a job (jobs.actions.submit), audited, and hands
Slurm work to the arrays' claim protocol (sweeps/submit.py)."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef

from accounts.models import Profile
from audit.log import record
from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import SlurmError
from cluster.records.array_ids import compress_ids
from cluster.records.gres import requested_gpus
from jobs.actions import DEFAULT_GROUP, charged_group, check_allocation, locked_profile, partition_for
from jobs.mirror.arrays import refresh_array
from jobs.models import FINAL_STATES, Job, JobArray, JobState, Sweep
from jobs.submission.checks import WorkAsked, run_submission_checks
from jobs.submission.quota import QuotaExceeded, check_quota
from jobs.submission.spec import JobSpec, SpecError, SpecPolicy, job_spec_from_dict, parse_job_spec
from plans.catalog import PlanSnapshot, plan_for
from sweeps.parameters import Grid
from sweeps.submit import enqueue_sweep, task_log_paths

log = logging.getLogger(__name__)


class SweepRefused(Exception):
    """A steering request that cannot be done (in words for the user); changes nothing."""


def _check_plan(user, plan: PlanSnapshot, spec: JobSpec) -> None:
    """A sweep's tasks count against the plan's concurrent quota while they run (Slurm holds the
    rest pending at the plan's limit): one task must fit now."""
    if plan.is_paused:
        raise QuotaExceeded(f"Your {plan.name} subscription is paused; resume it to submit jobs.")
    shares = spec.gpu.shards if not spec.gpu.count else 0
    check_quota(user, plan, spec.gpu.gpu_type, spec.gpu.count, shares)


def _check_waiting_tasks(user, plan: PlanSnapshot, adding: int) -> None:
    """A user's waiting sweep tasks are bounded by their plan's size (SWEEP_WAITING_TASKS_PER_GPU
    per GPU it may hold at once): five sweeps of 10,000 a minute were each a line in every
    mirror pass and slurmctld's queue."""
    most = settings.SWEEP_WAITING_TASKS_PER_GPU * max(1, sum(plan.gpu_quota.values()))
    waiting = Job.objects.filter(
        owner=user, sweep__isnull=False, state__in=(JobState.SUBMITTING, JobState.PENDING)
    ).count()
    if waiting + adding > most:
        raise QuotaExceeded(
            f"Your {plan.name} plan may have {most:,} sweep tasks waiting at once; {waiting:,} wait now and this "
            f"adds {adding:,}. Wait for some to start, or cancel a sweep's waiting tasks."
        )


def _task_rows(sweep: Sweep, array: JobArray, profile: Profile, indexes: Iterable[int], template: dict) -> list[Job]:
    rows = []
    for index in indexes:
        task_id = index - array.offset
        stdout, stderr = task_log_paths(array, profile.cluster_username, task_id)
        rows.append(
            Job(
                **template,
                name=f"{sweep.name}-{index}"[:200],
                sweep=sweep,
                sweep_index=index,
                array=array,
                array_task_id=task_id,
                standard_output=stdout,
                standard_error=stderr,
            )
        )
    return rows


def _add_arrays(sweep: Sweep, profile: Profile, indexes: list[int], template: dict, *, chained: bool) -> list[JobArray]:
    """Arrays for `indexes`, one per MaxArraySize block of the sweep (offset = the block's first
    index, so every task id is below MaxArraySize), with their task rows; `chained`: each after
    the one before (a new sweep's, so its throttle holds across them)."""
    size = settings.SLURM_MAX_ARRAY_SIZE
    blocks: dict[int, list[int]] = defaultdict(list)
    for index in sorted(indexes):
        blocks[index // size * size].append(index)
    arrays = []
    for offset, block in sorted(blocks.items()):
        array = JobArray.objects.create(
            sweep=sweep,
            offset=offset,
            task_ids=compress_ids(index - offset for index in block),
            task_count=len(block),
            depends_on=arrays[-1] if chained and arrays else None,
        )
        Job.objects.bulk_create(_task_rows(sweep, array, profile, block, template), batch_size=1000)
        arrays.append(array)
    return arrays


def _template(sweep: Sweep, profile: Profile, spec: JobSpec, plan: PlanSnapshot, group) -> dict:
    return {
        "owner_id": sweep.owner_id,
        "cluster_user": profile.cluster_username,
        "image": spec.image,
        "gpu_type": spec.gpu.gpu_type,
        "quota_gpus": spec.gpu.count,
        "quota_shards": spec.gpu.shards if not spec.gpu.count else 0,
        "tres_per_node": spec.gpu.tres_per_node(),
        # bulk_create does not call Job.save(), which counts a new row's GPUs from its request.
        "gpu_count": requested_gpus(spec.gpu.tres_per_node())[1],
        "time_limit_minutes": spec.time_limit_minutes,
        "partition": partition_for(plan),
        "account": group.slurm_account if group else settings.SLURM_ACCOUNT,
        "group": group,
        "qos": plan.qos,
        "state": JobState.SUBMITTING,
    }


def create_sweep(
    user,
    spec: JobSpec,
    grid: Grid,
    *,
    name: str,
    throttle: int = 0,
    group_id=DEFAULT_GROUP,
    plan: PlanSnapshot | None = None,
    metric_name: str = "",
    metric_goal: str = "min",
    cloned_from: Sweep | None = None,
) -> Sweep:
    """Accept a sweep: check it as a job (plan, quota for one task, group allocation for all),
    record the sweep, its arrays and a SUBMITTING row per point, and submit the arrays once
    committed. Raises SpecError, QuotaExceeded or NotProvisioned, having changed nothing."""
    if spec.spot:
        raise SpecError({"spot": ["A sweep's tasks run on the plan's GPUs, not as spot jobs."]})
    if spec.datasets:
        raise SpecError({"datasets": ["Sweeps do not mount datasets yet; use the data mount."]})
    with transaction.atomic():
        profile = locked_profile(user)
        plan = plan if plan is not None else plan_for(user)
        _check_plan(user, plan, spec)
        _check_waiting_tasks(user, plan, len(grid))
        group = charged_group(user, group_id)
        if group is not None:
            check_allocation(group, spec, len(grid))
        run_submission_checks(user, plan, group, WorkAsked(spec, len(grid)))
        sweep = Sweep.objects.create(
            owner=user,
            group=group,
            name=name,
            spec=spec.to_dict(),
            grid=grid.to_dict(),
            point_count=len(grid),
            throttle=throttle,
            metric_name=metric_name,
            metric_goal=metric_goal,
            cloned_from=cloned_from,
        )
        _add_arrays(sweep, profile, list(range(len(grid))), _template(sweep, profile, spec, plan, group), chained=True)
        record(
            user,
            "sweep.create",
            f"sweep {sweep.pk}",
            after={"points": len(grid), "throttle": throttle, "cloned_from": cloned_from.pk if cloned_from else None},
        )
        transaction.on_commit(lambda: enqueue_sweep(sweep.pk))
    return sweep


def set_throttle(user, sweep: Sweep, throttle: int) -> Sweep:
    """How many tasks run at once, changed live in Slurm (ArrayTaskThrottle of each array)."""
    if isinstance(throttle, bool) or not isinstance(throttle, int) or not 0 <= throttle <= sweep.point_count:
        raise SweepRefused(f"The throttle is a whole number from 0 (no limit) to {sweep.point_count}.")
    before = sweep.throttle
    unfinished = Job.objects.filter(array=OuterRef("pk")).exclude(state__in=FINAL_STATES)
    live = list(
        sweep.arrays.filter(state=JobArray.State.SUBMITTED, slurm_array_job_id__isnull=False)
        .filter(Exists(unfinished))
        .values_list("slurm_array_job_id", flat=True)
    )
    with transaction.atomic():
        # Arrays not yet in Slurm take the new value when they are submitted.
        Sweep.objects.filter(pk=sweep.pk).update(throttle=throttle)
        record(user, "sweep.throttle", f"sweep {sweep.pk}", before={"throttle": before}, after={"throttle": throttle})
    cli = slurm_cli()
    failed = []
    for array_job_id in live:
        try:
            cli.set_array_throttle(array_job_id, throttle)
        except SlurmError as exc:
            # The mirror lags Slurm by a pass: an array whose last task ended since has nothing
            # left to hold back, so that refusal is the throttle's goal reached, not a failure.
            if not _array_has_ended(exc):
                failed.append(exc)
    sweep.refresh_from_db()
    if failed:
        log.warning("sweep %s: throttle %s refused: %s", sweep.pk, throttle, "; ".join(e.message for e in failed))
        raise SweepRefused(
            "Slurm did not take the new throttle for every part of the sweep; try again. "
            + " ".join(sorted({exc.public_message for exc in failed}))
        )
    return sweep


# What scontrol answers for an array that has no task left to run (24.11 and 26.05).
_ARRAY_ENDED = ("Job has already finished", "Invalid job id specified")


def _array_has_ended(exc: SlurmError) -> bool:
    return any(needle in exc.message for needle in _ARRAY_ENDED)


def cancel_sweep(user, sweep: Sweep, *, pending_only: bool) -> int:
    """Cancel the sweep's pending tasks (those running finish), or every task. Returns the
    arrays Slurm was asked about."""
    with transaction.atomic():
        waiting = list(
            JobArray.objects.filter(sweep=sweep, state=JobArray.State.SUBMITTING, slurm_array_job_id__isnull=True)
            .select_for_update()
            .values_list("pk", flat=True)
        )
        JobArray.objects.filter(pk__in=waiting, state=JobArray.State.SUBMITTING).update(state=JobArray.State.CANCELLED)
        Job.objects.filter(array_id__in=waiting, state=JobState.SUBMITTING).update(
            state=JobState.CANCELLED, error="Cancelled before it reached Slurm."
        )
        record(user, "sweep.cancel", f"sweep {sweep.pk}", after={"pending_only": pending_only})
    client = rest_client(Profile.objects.get(user=sweep.owner).cluster_username)
    asked: list[int] = []
    # The last array first: each array waits for the one before it (afterany), so cancelling the
    # first one first would let the next start its tasks before its own cancel reaches Slurm.
    for array_job_id in (
        JobArray.objects.filter(sweep=sweep, state=JobArray.State.SUBMITTED)
        .exclude(slurm_array_job_id__isnull=True)
        .order_by("-offset")
        .values_list("slurm_array_job_id", flat=True)
    ):
        if not Job.objects.filter(array__slurm_array_job_id=array_job_id).exclude(state__in=FINAL_STATES).exists():
            continue
        try:
            client.cancel_array(array_job_id, pending_only=pending_only)
        except SlurmError as exc:
            raise SweepRefused(f"Slurm did not cancel the sweep's tasks: {exc.public_message}") from exc
        asked.append(array_job_id)
    # Shown at once, not at the mirror's next pass; read once every cancel is in.
    for array_job_id in asked:
        try:
            refresh_array(client, array_job_id)
        except SlurmError:
            pass
    return len(asked)


# Ended tasks a rerun may take again.
RERUNNABLE = frozenset(FINAL_STATES)
FAILED_STATES = frozenset(
    {
        JobState.FAILED,
        JobState.TIMEOUT,
        JobState.NODE_FAIL,
        JobState.OUT_OF_MEMORY,
        JobState.BOOT_FAIL,
        JobState.SUBMIT_FAILED,
        JobState.PREEMPTED,
        JobState.DEADLINE,
    }
)


def rerun_tasks(user, sweep: Sweep, indexes: list[int] | None = None) -> list[int]:
    """Run points again with the same values, as new arrays: the failed ones, or `indexes`
    (each must have ended). The earlier rows stay, as history, and their cost with them."""
    spec = job_spec_from_dict(sweep.spec)
    with transaction.atomic():
        profile = locked_profile(user)
        current = Job.objects.select_for_update().filter(sweep=sweep, sweep_current=True)
        if indexes is None:
            chosen = list(current.filter(state__in=FAILED_STATES).values_list("pk", "sweep_index"))
            if not chosen:
                raise SweepRefused("No task of this sweep has failed.")
        else:
            wanted = set(indexes)
            if not wanted or any(index < 0 or index >= sweep.point_count for index in wanted):
                raise SweepRefused(f"Tasks are numbered 0 to {sweep.point_count - 1}.")
            rows = dict(current.filter(sweep_index__in=wanted).values_list("sweep_index", "state"))
            busy = sorted(index for index, state in rows.items() if state not in RERUNNABLE)
            if busy:
                raise SweepRefused(f"Tasks {', '.join(map(str, busy[:10]))} have not ended; cancel them first.")
            chosen = list(current.filter(sweep_index__in=wanted).values_list("pk", "sweep_index"))
        plan = plan_for(user)
        _check_plan(user, plan, spec)
        _check_waiting_tasks(user, plan, len(chosen))
        group = sweep.group
        if group is not None:
            check_allocation(group, spec, len(chosen))
        run_submission_checks(user, plan, group, WorkAsked(spec, len(chosen)))
        Job.objects.filter(pk__in=[pk for pk, _index in chosen]).update(sweep_current=False)
        chosen_indexes = sorted(index for _pk, index in chosen)
        _add_arrays(sweep, profile, chosen_indexes, _template(sweep, profile, spec, plan, group), chained=False)
        record(user, "sweep.rerun", f"sweep {sweep.pk}", after={"points": chosen_indexes[:100], "count": len(chosen)})
        transaction.on_commit(lambda: enqueue_sweep(sweep.pk))
    return chosen_indexes


def clone_sweep(user, sweep: Sweep) -> Sweep:
    """The same base job, points and throttle again, as a new sweep of the caller's, checked
    against today's plan."""
    plan = plan_for(user)
    spec = parse_job_spec(sweep.spec, plan=plan, policy=SpecPolicy.from_settings())
    group_id = sweep.group_id if sweep.group_id else None
    return create_sweep(
        user,
        spec,
        Grid.from_dict(sweep.grid),
        name=sweep.name,
        throttle=sweep.throttle,
        group_id=group_id,
        plan=plan,
        metric_name=sweep.metric_name,
        metric_goal=sweep.metric_goal,
        cloned_from=sweep,
    )
