"""GPU reset, admin-only: hold the node (maintenance reservation), run the reset job in it,
release the node. Each step is a conditional UPDATE on the row's step, so a repeated or
concurrent task run never does a step twice; every step is written to the audit log."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.utils import timezone

from audit.log import record
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.clusters.services import rest_client
from cluster.commands.reservation_request import NOW
from cluster.errors import SlurmError
from cluster.models import Node
from cluster.records.types import TERMINAL_JOB_STATES
from console.actions.pinned_jobs import submit_pinned_job
from console.models import GpuReset
from jobs.logs import local_log_path, read_tail

log = logging.getLogger(__name__)
# The maintenance reservation lasts this long; a reset job still waiting then has lost.
HOLD_MINUTES = 120
RESET_SCRIPT = """#!/bin/bash
echo "GPUPOOL_GPU_RESET node=$(hostname) gpu={index}"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "GPUPOOL_GPU_RESET_UNAVAILABLE: nvidia-smi is not installed on this node"
  exit 3
fi
# Needs root: nodes grant it to the portal's admins with a sudoers rule (deploy/healthcheck/README.md).
exec sudo -n nvidia-smi --gpu-reset -i {index}
"""


def _audit(
    reset: GpuReset, action: str, succeeded: bool, result: str, *, before: dict | None = None, after: dict | None = None
) -> None:
    record(
        reset.requested_by,
        action,
        f"{reset.node}/gpu{reset.index}",
        before=before,
        after=after,
        parameters={"reset": reset.pk, "reservation": reset.reservation},
        succeeded=succeeded,
        result=result,
    )


def _advance(reset: GpuReset, from_step: str, to_step: str, **fields) -> bool:
    return bool(GpuReset.objects.filter(pk=reset.pk, step=from_step).update(step=to_step, **fields))


def _fail(reset: GpuReset, action: str, message: str) -> None:
    GpuReset.objects.filter(pk=reset.pk).exclude(step=GpuReset.Step.DONE).update(
        step=GpuReset.Step.FAILED, result=message
    )
    _audit(reset, action, False, message, after={"step": GpuReset.Step.FAILED.value})


def reserve_and_submit(reset: GpuReset) -> None:
    admin = reset.requested_by.profile
    name = f"gpureset_{reset.pk}"
    # Through the one gateway every reservation of the portal takes (a maintenance hold).
    gateway = reservation_gateway()
    try:
        gateway.create_node_reservation(
            name, nodes=[reset.node], users=[admin.cluster_username], start=NOW, duration_minutes=HOLD_MINUTES
        )
    except (SlurmError, ValueError) as exc:
        _fail(reset, "gpu_reset.hold", str(exc))
        return
    GpuReset.objects.filter(pk=reset.pk).update(reservation=name)
    reset.reservation = name
    _audit(
        reset,
        "gpu_reset.hold",
        True,
        f"reservation {name} holds {reset.node}",
        before={"reservation": ""},
        after={"reservation": name},
    )
    try:
        job = _submit_reset_job(reset, name)
    except SlurmError as exc:
        release(reset, failed_because=f"the reset job was refused: {exc.message}")
        return
    except Exception as exc:
        # Never leave the node held because a later step broke.
        release(reset, failed_because=f"the reset could not start: {exc}")
        raise
    _advance(reset, GpuReset.Step.RESERVING, GpuReset.Step.RESETTING, job=job)
    _audit(
        reset,
        "gpu_reset.job",
        True,
        f"reset job {job.slurm_job_id} submitted",
        before={"step": GpuReset.Step.RESERVING.value},
        after={"step": GpuReset.Step.RESETTING.value, "job": job.slurm_job_id},
    )


def past_deadline(reset: GpuReset) -> bool:
    return timezone.now() > reset.created_at + timedelta(minutes=HOLD_MINUTES)


def give_up(reset: GpuReset) -> None:
    """The GPUs never became free within the hold: cancel the reset job, release the node."""
    try:
        rest_client().cancel_job(reset.job.slurm_job_id)
    except SlurmError as exc:
        log.warning("could not cancel reset job %s: %s", reset.job.slurm_job_id, exc)
    release(reset, failed_because=f"the GPUs of {reset.node} did not become free within {HOLD_MINUTES} min")


def _submit_reset_job(reset: GpuReset, reservation: str):
    node = Node.objects.get(name=reset.node)
    gpu_type, count = node.gpus[0]["type"], node.gpu_total
    return submit_pinned_job(
        reset.requested_by,
        name=f"gpu-reset-{reset.node}-gpu{reset.index}",
        script=RESET_SCRIPT.format(index=int(reset.index)),
        node=reset.node,
        # Every GPU of the node: the one to reset must be ours, whichever index Slurm picks.
        tres_per_node=f"gres/gpu:{gpu_type}:{count}",
        minutes=5,
        reservation=reservation,
    )


def check_job(reset: GpuReset) -> bool:
    """True once the reset job has ended (and the node was released)."""
    try:
        job = rest_client().get_job(reset.job.slurm_job_id)
        state = job.state
    except SlurmError:
        record = rest_client().get_accounting(reset.job.slurm_job_id)
        state = record.state
    if state not in TERMINAL_JOB_STATES:
        return False
    output = read_tail(local_log_path(reset.job.standard_output, reset.job.cluster_user), 16 * 1024).text
    if "GPUPOOL_GPU_RESET_UNAVAILABLE" in output:
        outcome = f"not reset: nvidia-smi is not available on {reset.node} (emulated GPUs on the dev cluster)"
    elif state == "COMPLETED":
        outcome = f"GPU {reset.index} reset"
    else:
        outcome = f"the reset job ended {state}: {output.strip()[-500:]}"
    release(reset, outcome=outcome, succeeded=state == "COMPLETED")
    return True


def release(reset: GpuReset, *, outcome: str = "", succeeded: bool = False, failed_because: str = "") -> None:
    """Delete the maintenance reservation: the node takes new jobs again."""
    reset.refresh_from_db()
    if reset.step in (GpuReset.Step.DONE, GpuReset.Step.FAILED):
        return
    try:
        if reset.reservation:
            reservation_gateway().delete_reservation(reset.reservation)
    except (SlurmError, ValueError) as exc:
        _fail(reset, "gpu_reset.release", f"could not release {reset.node}: {exc}")
        return
    _audit(
        reset,
        "gpu_reset.release",
        True,
        f"reservation {reset.reservation} deleted",
        before={"reservation": reset.reservation},
        after={"reservation": ""},
    )
    final = GpuReset.Step.DONE if not failed_because else GpuReset.Step.FAILED
    message = failed_because or outcome
    GpuReset.objects.filter(pk=reset.pk).exclude(step__in=[GpuReset.Step.DONE, GpuReset.Step.FAILED]).update(
        step=final, result=message
    )
    _audit(
        reset,
        "gpu_reset",
        succeeded and not failed_because,
        message,
        before={"step": reset.step},
        after={"step": final.value},
    )
