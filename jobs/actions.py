"""Writes about jobs that span tables or systems. Views, the API and tasks call these;
they do not repeat the steps."""

from __future__ import annotations

import logging
import math
import uuid
from collections.abc import Sequence

from django.conf import settings
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from accounts.access import is_admin
from accounts.models import Profile
from audit.log import record
from cluster.clusters.registry import primary_cluster_name
from cluster.clusters.services import job_paths, rest_client
from cluster.errors import SlurmError, SlurmNotFound
from cluster.models import Node
from datasets.actions.node_cache import write_pins
from datasets.models import DatasetVersion, NodePin, VersionState
from datasets.queries import DatasetError
from datasets.storage import NODE_NAME
from groups.queries import GroupError, default_group, gpu_minutes_left, group_to_charge
from jobs.live.events import publish_job_update
from jobs.mirror.arrays import refresh_array
from jobs.mirror.rows import apply_slurm_job
from jobs.models import FINAL_STATES, Job, JobDataset, JobState
from jobs.submission.batch_script import DATASET_TOOL
from jobs.submission.checks import WorkAsked, run_submission_checks
from jobs.submission.clusters import ClusterChoice, choose_cluster, home_only_reason
from jobs.submission.datasets import Mount, lock_mounted_versions
from jobs.submission.quota import QuotaExceeded, check_quota
from jobs.submission.spec import JobSpec, SpecError
from jobs.tasks import claimed_for_inline_submission, enqueue_submission, submit_now
from plans.catalog import PlanSnapshot, plan_for
from reservations.actions import ReservationError, usable_for_job

log = logging.getLogger(__name__)


class NotProvisioned(Exception):
    pass


class CancelRefused(Exception):
    pass


# `group_id` left out: the user's default group (groups.queries.default_group), if any.
DEFAULT_GROUP = object()


def charged_group(user, group_id):
    """The group to charge, or None for the user themself; SpecError on `group` otherwise."""
    if group_id is DEFAULT_GROUP:
        default = default_group(user)
        if default is None:
            return None
        group_id = default.pk  # checked like a named group: open, in Slurm, still the user's
    if group_id in (None, ""):
        return None
    try:
        return group_to_charge(user, group_id)
    except GroupError as exc:
        raise SpecError({"group": [exc.message]}) from exc


def check_allocation(group, spec: JobSpec, runs: int = 1) -> None:
    """A group job (or a sweep's `runs` tasks) must fit what is left of the group's allocation of
    its GPU type, each at its time limit (Slurm would refuse it with AssocGrpGRESMinutes, or hold
    a sweep's tasks beyond it; this says so in words, with the figures)."""
    info = settings.GPU_TYPES[spec.gpu.gpu_type]
    gpus = spec.gpu.count or spec.gpu.shards / int(info["shards_per_gpu"])
    needs = math.ceil(gpus * spec.time_limit_minutes * runs)
    left = gpu_minutes_left(group, spec.gpu.gpu_type, timezone.now().date())
    if needs > left:
        what = "This job" if runs == 1 else f"This sweep ({runs} tasks)"
        raise SpecError(
            {
                "group": [
                    f"{what} may use up to {needs} {spec.gpu.gpu_type} GPU-minutes; {group.name} has {left} "
                    "left of its allocation. Shorten the time limit, or ask the group's PI to request more time."
                ]
            }
        )


def submit(
    user,
    spec: JobSpec,
    *,
    reservation_id=None,
    group_id=DEFAULT_GROUP,
    plan: PlanSnapshot | None = None,
    mounts: Sequence[Mount] = (),
    cluster=None,
    right_sized: dict | None = None,
) -> Job:
    """Accept a job: check the plan (and the reservation it should run in), record it as
    SUBMITTING, and hand it on once the row is committed: straight to Slurm from this request
    (settings.SUBMIT_INLINE; the returned job then carries its Slurm id) or to a worker.
    Raises QuotaExceeded, NotProvisioned or SpecError (on `reservation`); changes nothing then.
    `plan`: the caller's plan_for(user) when it has just read it (the spec was checked against it).
    `mounts`: the spec's dataset versions as jobs.submission.datasets.resolve_mounts found them.
    `cluster`: where it runs (jobs/submission/clusters.py): absent, a cluster's name, or `any`.
    `right_sized`: how the plan's right-sizing changed the ask (jobs/right_size.py), kept on the row."""
    plan = plan if plan is not None else plan_for(user)
    # Before the transaction: `any` asks every cluster's scheduler for its estimate.
    choice = _cluster_for(user, spec, cluster, reservation_id=reservation_id, group_id=group_id, plan=plan)
    with transaction.atomic():
        profile = locked_profile(user)
        if plan.is_paused:
            raise QuotaExceeded(f"Your {plan.name} subscription is paused; resume it to submit jobs.")
        quota_gpus = spec.gpu.count or 1
        reservation = None
        if spec.spot and reservation_id not in (None, ""):
            raise SpecError({"reservation": ["A spot job takes idle GPUs; it does not run in a reservation."]})
        if spec.spot and group_id not in (None, "", DEFAULT_GROUP):
            raise SpecError({"group": ["Spot jobs run on your own account, not a group's."]})
        if reservation_id not in (None, ""):
            try:
                reservation = usable_for_job(
                    user,
                    reservation_id,
                    gpu_type=spec.gpu.gpu_type,
                    gpus=quota_gpus,
                    time_limit_minutes=spec.time_limit_minutes,
                )
            except ReservationError as exc:
                raise SpecError(exc.errors) from exc
        group = None if spec.spot else charged_group(user, group_id)
        if group is not None:
            check_allocation(group, spec)
        shares = spec.gpu.shards if not spec.gpu.count else 0
        if spec.spot:
            # Spot takes only idle GPUs and gives them back: not the plan's concurrent quota.
            quota, shares = 0, 0
        else:
            check_quota(user, plan, spec.gpu.gpu_type, spec.gpu.count, shares)
            quota = spec.gpu.count
        # Higher layers' checks (a held budget: billing.actions.budgets), registered in their ready().
        run_submission_checks(user, plan, group, WorkAsked(spec))
        job = Job.objects.create(
            owner=user,
            cluster=choice.name,
            placement=choice.reason,
            movable=choice.movable,
            cluster_user=profile.cluster_username,
            name=spec.name,
            spec=spec.to_dict(),
            image=spec.image,
            gpu_type=spec.gpu.gpu_type,
            quota_gpus=quota,
            quota_shards=shares,
            tres_per_node=spec.gpu.tres_per_node(),
            time_limit_minutes=spec.time_limit_minutes,
            partition=partition_for(plan, spot=spec.spot, reserved=reservation is not None),
            account=group.slurm_account if group else settings.SLURM_ACCOUNT,
            group=group,
            qos=settings.SPOT_QOS if spec.spot else plan.qos,
            reservation=reservation,
            right_sized=right_sized or {},
            state=JobState.SUBMITTING,
            # Inline, the row is born claimed by this request (the claim a worker would take
            # with an UPDATE): a request that dies here leaves it to the reconciler once the
            # claim runs out, as a dead worker would.
            **(claimed_for_inline_submission() if settings.SUBMIT_INLINE else {}),
        )
        lock_mounted_versions(mounts)
        JobDataset.objects.bulk_create(
            JobDataset(job=job, version=mount.version, name=mount.name, size_bytes=mount.size_bytes) for mount in mounts
        )
        transaction.on_commit(lambda: _submit_and_tell(job, profile))
    return job


def _cluster_for(user, spec: JobSpec, requested, *, reservation_id, group_id, plan) -> ClusterChoice:
    if requested in (None, "", primary_cluster_name()):
        return ClusterChoice(primary_cluster_name(), "")
    reserved = reservation_id not in (None, "")
    group = None if spec.spot else charged_group(user, group_id)
    home_only = home_only_reason(spec, reserved=reserved, group=group, capped_plan=plan.included_hours_are_a_cap)
    partition = partition_for(plan, spot=spec.spot, reserved=reserved)
    return choose_cluster(requested, spec, partition=partition, home_only=home_only)


def locked_profile(user) -> Profile:
    """The user's profile, locked for this transaction: the lock serialises one user's
    submissions, so the quota check sees every job. NotProvisioned without a cluster account."""
    profile = Profile.objects.select_for_update().get(user=user)
    if not profile.cluster_username or not profile.provisioned_at:
        # provisioning_error holds command output for admins; the user hears that it failed.
        raise NotProvisioned(
            "Your cluster account is not ready yet"
            + ("; setting it up failed and an admin can see why." if profile.provisioning_error else ".")
        )
    return profile


def partition_for(plan, *, spot: bool = False, reserved: bool = False) -> str:
    """Where a job may run. A free plan's job may also run in the floor partition, whose jobs
    Slurm weighs before the rest (PriorityTier) up to the floor's few GPUs: one free job is
    always first in line for the next free GPU, however many paid jobs wait (docs/slurm.md).
    A job in a reservation runs on its GPUs, in the reservation's partition."""
    floor = settings.SLURM_FREE_FLOOR_PARTITION
    if floor and plan.included_hours_are_a_cap and not spot and not reserved:
        return f"{floor},{settings.SLURM_PARTITION}"
    return settings.SLURM_PARTITION


def _submit_and_tell(job: Job, profile: Profile) -> None:
    """Straight to Slurm from this request when it may (settings.SUBMIT_INLINE), else through a
    worker; the owner's pages hear of the job once: in Slurm (the attach pushes it), or waiting."""
    if not settings.SUBMIT_INLINE:
        enqueue_submission(job.pk)
    elif submit_now(job, profile):
        return  # the attach told them
    publish_job_update(job.pk)


def cancel(job: Job) -> None:
    """Cancel a job of the caller's. A job not yet in Slurm is cancelled here; the worker
    that may be submitting it right now sees the state and cancels what it submitted."""
    if job.state == JobState.SUBMITTING:
        updated = Job.objects.filter(pk=job.pk, state=JobState.SUBMITTING, slurm_job_id__isnull=True).update(
            state=JobState.CANCELLED, error="Cancelled before it reached Slurm."
        )
        if updated:
            transaction.on_commit(lambda: publish_job_update(job.pk))
            return
        job.refresh_from_db()
    if job.state in FINAL_STATES:
        raise CancelRefused(f"The job has already ended ({job.state}).")
    if job.array_id is not None:
        _cancel_array_task(job)
        return
    if job.slurm_job_id is None:
        raise CancelRefused("The job is not in Slurm yet; try again in a moment.")
    client = rest_client(job.cluster_user, cluster=job.cluster)
    try:
        client.cancel_job(job.slurm_job_id)
    except SlurmNotFound:
        pass  # already gone from slurmctld; the mirror finishes it from accounting
    except SlurmError as exc:
        raise CancelRefused(f"Slurm did not cancel the job: {exc.public_message}") from exc
    # Show the new state at once instead of at the mirror's next pass.
    try:
        apply_slurm_job(client.get_job(job.slurm_job_id), job.cluster)
    except SlurmError:
        pass


def _cancel_array_task(job: Job) -> None:
    """A sweep's task: cancelled by its array's id and its task id (a pending task has no job id
    of its own), then its array read at once."""
    array_job_id = job.array.slurm_array_job_id
    if array_job_id is None:
        raise CancelRefused("The task's array is not in Slurm yet; try again in a moment.")
    client = rest_client(job.cluster_user)
    try:
        client.cancel_array(array_job_id, task_ids=[job.array_task_id])
    except SlurmError as exc:
        raise CancelRefused(f"Slurm did not cancel the task: {exc.public_message}") from exc
    try:
        refresh_array(client, array_job_id)
    except SlurmError:
        pass


def create_pinned_job(
    user, *, name: str, script: str, node: str, tres_per_node: str, minutes: int, reservation: str = ""
) -> Job:
    """An operational job (diagnostic, GPU reset) pinned to one node, recorded as SUBMITTING
    like any job, so it reaches Slurm through the same claim and comment (jobs/tasks.py): the
    mirror can never record it first under another row."""
    profile = Profile.objects.get(user=user)
    if not profile.cluster_username or not profile.provisioned_at:
        raise NotProvisioned("Your cluster account is not ready yet.")
    job_uuid = uuid.uuid4()
    directory = job_paths().job_dir(profile.cluster_username) / str(job_uuid)
    return Job.objects.create(
        uuid=job_uuid,
        owner=user,
        cluster_user=profile.cluster_username,
        name=name,
        pinned={"script": script, "node": node, "reservation": reservation},
        tres_per_node=tres_per_node,
        time_limit_minutes=minutes,
        partition=settings.SLURM_PARTITION,
        account=settings.SLURM_ACCOUNT,
        standard_output=f"{directory}/stdout.log",
        standard_error=f"{directory}/stdout.log",
        state=JobState.SUBMITTING,
    )


# --- Dataset versions pinned to nodes -------------------------------------------------------
# Admins pin a dataset version to nodes: copied there before any user's job needs it, and never
# evicted while the pin stands.
#
# Pinning writes DATASET_STORE/pins/<node> (one sha256 a line: the copies the node's tool must keep)
# and submits, per node, a short staging job as the admin (jobs.actions.create_pinned_job: the
# same claim-and-comment submission as every job, retried by the worker when Slurm is away). That
# job holds the version's GB as gres/nvme like any job on the data, gets the same grant, and its
# tool lines (jobs/dataset_staging.py) record the node's copy and Slurm feature. Unpinning only
# rewrites the list: the copy stays, now evictable like any other.

PIN_MINUTES = 60  # a staging job's time limit: a copy from the store at well under 1 GB/s
# The staging job's own script: the tool, then nothing (the portal's text, no user input).
PIN_SCRIPT = '#!/bin/bash\nset -euo pipefail\nexec sudo -n {tool} stage {uuid} "$SLURM_JOB_ID"\n'


def _pinned_bytes(node: str) -> int:
    return NodePin.objects.filter(node=node).aggregate(total=Sum("version__size_bytes"))["total"] or 0


def _check(actor, version: DatasetVersion, nodes: list[str]) -> list[Node]:
    if not is_admin(actor):
        raise DatasetError("nodes", "Only admins pin datasets to nodes.", status=403)
    if version.state != VersionState.READY:
        raise DatasetError("version", f"Version {version.number} is not ready.")
    if not nodes:
        raise DatasetError("nodes", "Choose at least one node.")
    if any(not NODE_NAME.match(name) for name in nodes):
        raise DatasetError("nodes", "Not a node name.")
    found = {node.name: node for node in Node.objects.filter(name__in=nodes)}
    unknown = sorted(set(nodes) - set(found))
    if unknown:
        raise DatasetError("nodes", f"No such node: {', '.join(unknown)}.")
    for name in sorted(set(nodes)):
        node = found[name]
        capacity = node.nvme_gb * 10**9
        if not capacity:
            raise DatasetError("nodes", f"{name} has no NVMe cache (gres/nvme).")
        already = NodePin.objects.filter(node=name, version=version).exists()
        wanted = _pinned_bytes(name) + (0 if already else version.size_bytes)
        if wanted > capacity:
            raise DatasetError(
                "nodes",
                f"Pins on {name} would take {wanted / 1e9:.1f} GB of its {node.nvme_gb} GB cache: "
                "unpin something there first.",
            )
    return [found[name] for name in sorted(set(nodes))]


def staging_job(version: DatasetVersion, node: str) -> Job | None:
    """The newest pinned job that staged (or stages) the version on the node."""
    return (
        Job.objects.filter(datasets__version=version, pinned__node=node)
        .exclude(pinned={})
        .order_by("-created_at", "-pk")
        .first()
    )


def _stage_on(actor, version: DatasetVersion, node: Node) -> Job:
    gb = max(1, math.ceil(version.size_bytes / 10**9))
    job = create_pinned_job(
        actor,
        name=f"pin-{version.dataset.name}-v{version.number}"[:100],
        script="",
        node=node.name,
        tres_per_node=f"gres/nvme:{gb}",
        minutes=PIN_MINUTES,
    )
    script = PIN_SCRIPT.format(tool=DATASET_TOOL, uuid=job.uuid)
    job.pinned = {**job.pinned, "script": script, "datasets": [version.pk]}
    job.save(update_fields=["pinned"])
    JobDataset.objects.create(job=job, version=version, name=version.dataset.name, size_bytes=version.size_bytes)
    return job


def pin_version(actor, version: DatasetVersion, nodes: list[str]) -> list[NodePin]:
    """Pin `version` on each node and stage it there (a job per node whose copy is not already
    being made). Raises DatasetError, changing nothing, on a refusal."""
    with transaction.atomic():
        version = DatasetVersion.objects.select_for_update().select_related("dataset").get(pk=version.pk)
        checked = _check(actor, version, nodes)
        pins, submitted = [], []
        for node in checked:
            pin, _ = NodePin.objects.get_or_create(node=node.name, version=version, defaults={"pinned_by": actor})
            earlier = staging_job(version, node.name)
            if earlier is None or earlier.state in FINAL_STATES:
                # A pin asked again re-stages (the copy may have been evicted before the pin).
                submitted.append(_stage_on(actor, version, node).pk)
            pins.append(pin)
            record(actor, "dataset.pin", node.name, after={"version": version.pk, "dataset": version.dataset_id})
        for node in checked:
            write_pins(node.name)
        transaction.on_commit(lambda: [enqueue_submission(pk) for pk in submitted])
    return pins


def unpin(actor, version: DatasetVersion, node: str) -> bool:
    """The pin goes (the copy stays, evictable again). False when there was none."""
    if not is_admin(actor):
        raise DatasetError("nodes", "Only admins pin datasets to nodes.", status=403)
    with transaction.atomic():
        deleted, _ = NodePin.objects.filter(version=version, node=node).delete()
        if deleted:
            write_pins(node)
            record(actor, "dataset.unpin", node, after={"version": version.pk, "dataset": version.dataset_id})
    return bool(deleted)
