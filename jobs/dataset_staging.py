"""How a job's datasets reached its node: the node tool's lines (deploy/node/gpupool-dataset-cache)
at the head of the job's output, read while the job runs and once it has ended.

    GPUPOOL_DATASET_PROGRESS <version id> <bytes copied> <bytes>
    GPUPOOL_DATASET_READY <version id> <warm|cold> <bytes> <seconds>
    GPUPOOL_DATASET_EVICTED <sha256 of the version evicted> <bytes>

They become the job's `JobDataset` rows (warm or cold, how long, progress for the page) and the
node's `datasets.NodeCopy` rows, whose Slurm features later jobs prefer.

The output file is the job's to write, so the lines are read only before the batch script's
`OUTPUT_MARKER` (the user's command runs after it), from the front, bounded, never through a
link (jobs.logs); a READY line counts only for a version the job mounts, on the node Slurm ran
it on. A job could still rewrite its own file; the worst it gains is a wrong warm/cold label
on its own job, or a node preferred for data it does not hold (that job then copies it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from django.utils import timezone

from cluster.records.hostlist import expand_hostlist
from datasets.actions import node_cache
from jobs import protocol
from jobs.logs import local_log_path, read_head
from jobs.models import FINAL_STATES, Job, JobDataset
from jobs.submission.batch_script import OUTPUT_MARKER

HEAD_BYTES = 512 * 1024
_NUMBER = r"([0-9]{1,18})"
_PROGRESS = re.compile(rf"^GPUPOOL_DATASET_PROGRESS {_NUMBER} {_NUMBER} {_NUMBER}$", re.M)
_READY = re.compile(rf"^GPUPOOL_DATASET_READY {_NUMBER} (warm|cold) {_NUMBER} ([0-9]{{1,9}}(?:\.[0-9]{{1,3}})?)$", re.M)
_EVICTED = re.compile(rf"^GPUPOOL_DATASET_EVICTED ([0-9a-f]{{64}}) {_NUMBER}$", re.M)


@dataclass
class StagingLines:
    progress: dict[int, int] = field(default_factory=dict)  # version id -> bytes copied so far
    ready: dict[int, tuple[str, int, Decimal]] = field(default_factory=dict)  # id -> (warmth, bytes, seconds)
    evicted: list[str] = field(default_factory=list)  # sha256 of each copy removed


def parse_staging(text: str) -> StagingLines:
    """The tool's lines in the part of the output before the job's own (the last of each kind wins)."""
    head = text.split(OUTPUT_MARKER, 1)[0]
    lines = StagingLines()
    for match in _PROGRESS.finditer(head):
        lines.progress[int(match[1])] = int(match[2])
    for match in _READY.finditer(head):
        try:
            seconds = Decimal(match[4])
        except InvalidOperation:
            continue
        lines.ready[int(match[1])] = (match[2], int(match[3]), seconds)
    lines.evicted = [match[1] for match in _EVICTED.finditer(head)]
    return lines


def record_staging(job_pk: int) -> bool:
    """Bring the job's JobDataset rows and its node's copies up to date. True when there is no
    more to learn (every version ready, or the job has ended)."""
    job = Job.objects.filter(pk=job_pk).first()
    if job is None:
        return True
    mounts = {mount.version_id: mount for mount in JobDataset.objects.filter(job=job)}
    if not mounts:
        return True
    if job.state in FINAL_STATES:
        # Over: the node tool must not stage for it again (a grant outliving its job would serve
        # a later job of the same user submitted by hand).
        node_cache.forget_grant(job.uuid)
    nodes = expand_hostlist(job.nodes) if job.nodes else []
    if len(nodes) != 1:
        return job.is_final
    node = nodes[0]
    # Before the mirror has copied Slurm's paths onto the row, the one the portal submitted.
    output = job.standard_output or f"{protocol.job_directory(job)}/stdout.log"
    lines = parse_staging(read_head(local_log_path(output, job.cluster_user), HEAD_BYTES))

    changed_copies = False
    for sha256 in lines.evicted:
        changed_copies |= node_cache.record_eviction(node, sha256)
    now = timezone.now()
    for version_id, mount in mounts.items():
        if version_id in lines.ready:
            warmth, size, seconds = lines.ready[version_id]
            if not mount.ready_at or mount.node != node:
                JobDataset.objects.filter(pk=mount.pk).update(
                    node=node,
                    warmth=warmth,
                    copied_bytes=mount.size_bytes if warmth == JobDataset.Warmth.COLD else 0,
                    staging_seconds=min(seconds, Decimal("9999999")),
                    ready_at=now,
                )
            changed_copies |= node_cache.record_copy(node, version_id, mount.size_bytes)
        elif version_id in lines.progress and not mount.ready_at:
            copied = min(lines.progress[version_id], mount.size_bytes)
            JobDataset.objects.filter(pk=mount.pk).update(node=node, copied_bytes=copied)
    if changed_copies:
        node_cache.sync_node_features(node)
    complete = all(version_id in lines.ready for version_id in mounts)
    return complete or job.state in FINAL_STATES
