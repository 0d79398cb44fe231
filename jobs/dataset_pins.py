"""Admins pin a dataset version to nodes: copied there before any user's job needs it, and never
evicted while the pin stands.

Pinning writes DATASET_STORE/pins/<node> (one sha256 a line: the copies the node's tool must keep)
and submits, per node, a short staging job as the admin (jobs.actions.create_pinned_job: the
same claim-and-comment submission as every job, retried by the worker when Slurm is away). That
job holds the version's GB as gres/nvme like any job on the data, gets the same grant, and its
tool lines (jobs/dataset_staging.py) record the node's copy and Slurm feature. Unpinning only
rewrites the list: the copy stays, now evictable like any other.
"""

from __future__ import annotations

import math

from django.db import transaction
from django.db.models import Sum

from accounts.access import is_admin
from audit.log import record
from cluster.models import Node
from datasets.models import DatasetVersion, NodePin, VersionState
from datasets.node_cache import write_pins
from datasets.queries import DatasetError
from datasets.storage import NODE_NAME
from jobs import actions as job_actions
from jobs.models import FINAL_STATES, Job, JobDataset
from jobs.submission.batch_script import DATASET_TOOL
from jobs.tasks import enqueue_submission

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
    job = job_actions.create_pinned_job(
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
