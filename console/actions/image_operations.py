"""Prewarm or remove one catalogue image on every node, or list what the nodes hold: one short
job pinned to each node, submitted as the admin who asked, running the node-side tool
deploy/node/gpupool-image-cache through sudo (as GPU resets run nvidia-smi). Every job ends
with the node's listing of its prewarmed files, which becomes that node's `NodeImage` rows:
the console shows what the nodes said, and when.

Passes drive an operation (`console.tasks`: one when it starts, then the beat's sweep every
5 s): each claims a node's part with a conditional UPDATE before submitting (a repeated or
concurrent pass never submits twice), looks at the jobs the mirror keeps up to date, and reads
each finished job's output (bounded, and
without following links: the admin's job directory is a job's to write).
"""

from __future__ import annotations

import logging
import re
import shlex
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from audit.log import record
from cluster.clusters.services import rest_client
from cluster.errors import SlurmError
from cluster.models import Node
from console.actions import canary
from console.actions.pinned_jobs import submit_pinned_job
from console.models import CanaryRun, ImageOperation, ImageOperationNode, NodeImage
from foundation.images import Image
from foundation.words import counted
from jobs.logs import local_log_path, read_tail
from jobs.models import FINAL_STATES, JobState

log = logging.getLogger(__name__)

TOOL = "/usr/local/sbin/gpupool-image-cache"
# A prewarm pulls an image of tens of GB on a real site; a removal or a listing takes a second.
JOB_MINUTES = {ImageOperation.Kind.PREWARM: 60, ImageOperation.Kind.REMOVE: 5, ImageOperation.Kind.INVENTORY: 5}
# An operation whose jobs have not all ended by then (a node that never ran its job) is given up.
DEADLINE = timedelta(hours=2)
# Failed submissions (Slurm down) are retried until then, the error shown on the node's row.
SUBMIT_RETRY_FOR = timedelta(minutes=10)
OUTPUT_LIMIT = 64 * 1024
# Nodes that run no new job: a pinned job there would wait for ever.
UNAVAILABLE_FLAGS = ("DOWN", "DRAIN", "FAIL", "NOT_RESPONDING", "FUTURE")

_FILE_LINE = re.compile(
    r"^GPUPOOL_IMAGE_FILE ([A-Za-z0-9][A-Za-z0-9._+-]{0,200}\.sqsh) ([0-9]{1,15}) ([0-9]{1,12})$", re.M
)
_PREWARM_LINE = re.compile(r"^GPUPOOL_IMAGE_PREWARM (kept|imported) \S+ ([0-9]{1,7})$", re.M)
_REMOVED_LINE = re.compile(r"^GPUPOOL_IMAGE_REMOVED ", re.M)
_TOOL_ERROR = re.compile(r"^gpupool-image-cache: (.{1,300})$", re.M)


class OperationRefused(Exception):
    pass


def node_script(operation: ImageOperation) -> str:
    """The job's script: the node-side tool with catalogue values (checked by foundation/images.py
    when the catalogue was loaded), quoted all the same."""
    if operation.kind == ImageOperation.Kind.PREWARM:
        image = catalogue_image(operation.image)
        arguments = ["prewarm", image.pinned_reference, image.prewarm_file]
    elif operation.kind == ImageOperation.Kind.REMOVE:
        arguments = ["remove", operation.file]
    else:
        arguments = ["list"]
    return (
        "#!/bin/bash\n"
        'echo "GPUPOOL_IMAGE_OPERATION node=${SLURMD_NODENAME:-$(hostname)}"\n'
        f"exec sudo -n {TOOL} {shlex.join(arguments)}\n"
    )


def catalogue_image(reference: str) -> Image:
    for image in settings.IMAGE_CATALOGUE.images:
        if image.reference == reference:
            return image
    raise OperationRefused(f"{reference} is not in the image catalogue.")


def available_nodes() -> tuple[list[str], dict[str, str]]:
    """Nodes that take jobs now, and the others with why not."""
    usable, skipped = [], {}
    for node in Node.objects.order_by("name"):
        flags = {node.state.upper(), *node.state_flags.upper().replace("+", ",").split(",")}
        bad = sorted(flag for flag in flags if flag in UNAVAILABLE_FLAGS)
        if bad:
            skipped[node.name] = f"not tried: the node is {'+'.join(bad)}"
        else:
            usable.append(node.name)
    return usable, skipped


def start(user, kind: str, reference: str = "") -> ImageOperation:
    """Records the operation and one part per node; the caller hands it to the worker
    (console.tasks.run_image_operation), or the beat's sweep finds it within seconds."""
    kind = ImageOperation.Kind(kind)
    file = ""
    if kind != ImageOperation.Kind.INVENTORY:
        file = catalogue_image(reference).prewarm_file
    if not settings.CLUSTER_OPS_GROUP:
        raise OperationRefused(
            "The nodes do not let the portal run the image tool: set CLUSTER_OPS_GROUP and install "
            "deploy/node/gpupool-image-cache with its sudoers rule (deploy/node/README.md)."
        )
    profile = user.profile
    if not profile.cluster_username or not profile.provisioned_at:
        raise OperationRefused("Your cluster account is not ready yet.")
    usable, skipped = available_nodes()
    if not usable:
        raise OperationRefused("No node takes jobs now.")
    with transaction.atomic():
        busy = ImageOperation.objects.select_for_update().filter(finished_at__isnull=True, file=file)
        if busy.exists():
            raise OperationRefused("An operation on this image is still running; wait for it to finish.")
        operation = ImageOperation.objects.create(kind=kind, image=reference, file=file, requested_by=user)
        ImageOperationNode.objects.bulk_create(
            [ImageOperationNode(operation=operation, node=name) for name in usable]
            + [
                ImageOperationNode(
                    operation=operation,
                    node=name,
                    state=ImageOperationNode.State.FAILED,
                    result=why,
                    finished_at=timezone.now(),
                )
                for name, why in skipped.items()
            ]
        )
        record(
            user,
            f"image.{kind}",
            reference or "all images",
            parameters={"operation": operation.pk, "nodes": usable, "skipped": sorted(skipped)},
        )
    return operation


def advance(operation_pk: int) -> bool:
    """One pass: submit what is unsubmitted, collect what ended. True once the operation is over."""
    operation = ImageOperation.objects.select_related("requested_by__profile").get(pk=operation_pk)
    if operation.finished_at:
        return True
    past_deadline = timezone.now() > operation.created_at + DEADLINE
    for part in operation.nodes.select_related("job").exclude(state__in=_ENDED):
        if part.state == ImageOperationNode.State.SUBMITTING:
            _submit(operation, part, give_up=past_deadline)
        elif part.job and part.job.state in FINAL_STATES:
            _collect(operation, part)
        elif past_deadline:
            _abandon(part)
    if operation.nodes.exclude(state__in=_ENDED).exists():
        return False
    _finish(operation)
    return True


_ENDED = (ImageOperationNode.State.DONE, ImageOperationNode.State.FAILED)


def _submit(operation: ImageOperation, part: ImageOperationNode, *, give_up: bool) -> None:
    if give_up or timezone.now() > operation.created_at + SUBMIT_RETRY_FOR:
        _end(part, ImageOperationNode.State.FAILED, f"not submitted: {part.result or 'gave up'}")
        return
    # The claim: only the pass that moves the row to WAITING submits.
    if not ImageOperationNode.objects.filter(pk=part.pk, state=ImageOperationNode.State.SUBMITTING, job=None).update(
        state=ImageOperationNode.State.WAITING
    ):
        return
    try:
        job = submit_pinned_job(
            operation.requested_by,
            name=f"image-{operation.kind}-{part.node}",
            script=node_script(operation),
            node=part.node,
            tres_per_node="",
            minutes=JOB_MINUTES[operation.kind],
        )
    except SlurmError as exc:
        # Back to SUBMITTING with the error on the row: the next pass tries again.
        ImageOperationNode.objects.filter(pk=part.pk).update(
            state=ImageOperationNode.State.SUBMITTING, result=f"Slurm did not take the job: {exc.public_message}"
        )
        return
    ImageOperationNode.objects.filter(pk=part.pk).update(job=job, result="")


def _collect(operation: ImageOperation, part: ImageOperationNode) -> None:
    job = part.job
    output = read_tail(local_log_path(job.standard_output, job.cluster_user), OUTPUT_LIMIT).text
    outcome = parse_output(output)
    reported_at = job.end_time or timezone.now()
    if outcome.listed:
        _replace_listing(part.node, outcome.files, reported_at)
    if job.state == JobState.COMPLETED and outcome.succeeded(operation.kind):
        _end(
            part, ImageOperationNode.State.DONE, outcome.summary(operation.kind), import_seconds=outcome.import_seconds
        )
    else:
        _end(part, ImageOperationNode.State.FAILED, outcome.failure(job.state, job.state_reason))


def _abandon(part: ImageOperationNode) -> None:
    job = part.job
    if job is not None and job.slurm_job_id:
        try:
            rest_client().cancel_job(job.slurm_job_id)
        except SlurmError as exc:
            log.warning("could not cancel image job %s: %s", job.slurm_job_id, exc)
    _end(part, ImageOperationNode.State.FAILED, f"gave up after {DEADLINE}: the job never ended on {part.node}")


def _end(part: ImageOperationNode, state: str, result: str, import_seconds: int | None = None) -> None:
    ImageOperationNode.objects.filter(pk=part.pk).exclude(state__in=_ENDED).update(
        state=state, result=result[:2000], import_seconds=import_seconds, finished_at=timezone.now()
    )


def _finish(operation: ImageOperation) -> None:
    if not ImageOperation.objects.filter(pk=operation.pk, finished_at=None).update(finished_at=timezone.now()):
        return
    parts = list(operation.nodes.all())
    failed = [p for p in parts if p.state == ImageOperationNode.State.FAILED]
    record(
        operation.requested_by,
        f"image.{operation.kind}.finished",
        operation.image or "all images",
        parameters={"operation": operation.pk},
        succeeded=not failed,
        result=f"{len(parts) - len(failed)} of {counted(len(parts), 'node')} done"
        + (f"; failed: {', '.join(p.node for p in failed)}" if failed else ""),
    )
    took = [part.node for part in parts if part.state == ImageOperationNode.State.DONE]
    if operation.kind == ImageOperation.Kind.PREWARM and took:
        # An image change: the canary starts a container of that image on each node that took it.
        try:
            canary.start(
                operation.requested_by,
                CanaryRun.Trigger.IMAGE_PREWARMED,
                f"After prewarming {operation.image}",
                nodes=took,
                image=operation.image,
            )
        except canary.CanaryRefused as exc:
            log.warning("image operation %s: no canary after it: %s", operation.pk, exc)


def _replace_listing(node: str, files: dict[str, tuple[int, datetime]], reported_at: datetime) -> None:
    with transaction.atomic():
        NodeImage.objects.filter(node=node).exclude(file__in=list(files)).delete()
        for file, (size, modified) in files.items():
            NodeImage.objects.update_or_create(
                node=node, file=file, defaults={"bytes": size, "modified_at": modified, "reported_at": reported_at}
            )


@dataclass
class Outcome:
    files: dict[str, tuple[int, datetime]]
    listed: bool
    prewarm: str  # "kept", "imported" or ""
    import_seconds: int | None
    removed: bool
    error: str

    def succeeded(self, kind: str) -> bool:
        if kind == ImageOperation.Kind.PREWARM:
            return bool(self.prewarm)
        if kind == ImageOperation.Kind.REMOVE:
            return self.removed
        return self.listed

    def summary(self, kind: str) -> str:
        if kind == ImageOperation.Kind.PREWARM:
            if self.prewarm == "kept":
                return "already prewarmed"
            return f"imported in {self.import_seconds} s"
        if kind == ImageOperation.Kind.REMOVE:
            return "removed"
        return f"{len(self.files)} image(s) listed"

    def failure(self, state: str, reason: str) -> str:
        if self.error:
            return self.error
        return f"the job ended {state}{f' ({reason})' if reason else ''} without the tool's answer"


def parse_output(text: str) -> Outcome:
    """The node tool's lines (deploy/node/gpupool-image-cache) -> what happened there."""
    files = {}
    for match in _FILE_LINE.finditer(text):
        files[match[1]] = (int(match[2]), datetime.fromtimestamp(int(match[3]), tz=UTC))
    # The tool ends every run with its listing, even an empty one: a finished run listed.
    listed = bool(files) or "GPUPOOL_IMAGE_PREWARM" in text or bool(_REMOVED_LINE.search(text))
    prewarm = _PREWARM_LINE.search(text)
    error = ""
    if "sudo:" in text and ("password is required" in text or "not allowed" in text or "not in the sudoers" in text):
        error = (
            "the node refused sudo for the image tool: the admin's cluster account must be in the "
            f"{settings.CLUSTER_OPS_GROUP or 'operators'} group and the node must have the sudoers rule "
            "(deploy/node/README.md)"
        )
    elif f"{TOOL}: command not found" in text or "exec: sudo: not found" in text:
        error = f"the node lacks sudo or {TOOL} (deploy/node/README.md)"
    elif tool_error := _TOOL_ERROR.search(text):
        error = tool_error[1]
    return Outcome(
        files=files,
        listed=listed,
        prewarm=prewarm[1] if prewarm else "",
        import_seconds=int(prewarm[2]) if prewarm and prewarm[1] == "imported" else None,
        removed=bool(_REMOVED_LINE.search(text)),
        error=error,
    )


def progress(operation: ImageOperation) -> dict:
    """What the page and its poll show: the parts' states, counts and elapsed times."""
    parts = list(operation.nodes.select_related("job"))
    now = timezone.now()
    rows = []
    for part in parts:
        job = part.job
        started = job.start_time if job else None
        until = part.finished_at or now
        rows.append(
            {
                "node": part.node,
                "state": part.state,
                "job_state": job.state if job else "",
                "slurm_job_id": job.slurm_job_id if job else None,
                "result": part.result,
                "elapsed_seconds": int((until - started).total_seconds()) if started else None,
            }
        )
    ended = sum(1 for p in parts if p.state in _ENDED)
    return {
        "id": operation.pk,
        "kind": operation.kind,
        "image": operation.image,
        "finished": operation.finished_at is not None,
        "nodes_total": len(parts),
        "nodes_ended": ended,
        "nodes_failed": sum(1 for p in parts if p.state == ImageOperationNode.State.FAILED),
        "seconds": int(((operation.finished_at or now) - operation.created_at).total_seconds()),
        "nodes": rows,
    }
