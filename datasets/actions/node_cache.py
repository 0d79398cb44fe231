"""The nodes' NVMe caches of dataset versions, as the portal sees and steers them.

A job that mounts versions gets a grant in the store (`write_grant`, before it is submitted):
the node tool (deploy/node/gpupool-dataset-cache) stages only what a grant names, for the user
it names. The tool's lines in the job's output tell which node now holds which version, and
which it evicted (`record_copy`, `record_eviction`, called by jobs/dataset_staging.py); each
node's Slurm features carry `ds_<version id>` for the versions it holds (`sync_node_features`),
so a job on a version prefers a node that has it (`prefer_for`, Slurm's soft `--prefer`).

Features set with scontrol are lost when slurmctld restarts; the beat sweep
`datasets.tasks.sync_all_node_features` puts them back, and a submission whose preference
names a feature no node has any more is sent again without it (jobs/tasks.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import SlurmError
from datasets import storage
from datasets.manifest import manifest_lines
from datasets.models import DatasetFile, DatasetVersion, NodeCopy, NodePin, VersionState
from datasets.queries import own_datasets

log = logging.getLogger(__name__)

FEATURE_PREFIX = "ds_"


def feature_for(version_id: int) -> str:
    return f"{FEATURE_PREFIX}{int(version_id)}"


def ensure_manifest(version: DatasetVersion) -> None:
    """versions/<id>.manifest, from the verified files' rows, unless the one there is already
    this version's (its sha256 is the version's: a store that outlived its database may hold
    another version <id>'s)."""
    if storage.manifest_sha256(version.pk) == version.sha256:
        return
    files = DatasetFile.objects.filter(version=version).values_list("path", "size_bytes", "sha256")
    storage.write_manifest(version.pk, "".join(manifest_lines(list(files))))


def grant_text(cluster_user: str, versions: list[tuple[DatasetVersion, str]]) -> str:
    """The grant's lines (the node tool's format): the user, then per version its id, sha256,
    bytes, files and the name it is mounted under (/data/<name>)."""
    lines = [f"user {cluster_user}\n"]
    for version, name in versions:
        if version.state != VersionState.READY:
            raise ValueError(f"version {version.pk} is not ready")
        lines.append(f"version {version.pk} {version.sha256} {version.size_bytes} {version.file_count} {name}\n")
    return "".join(lines)


def write_grant(job_uuid, cluster_user: str, versions: list[tuple[DatasetVersion, str]]) -> None:
    """Before the job reaches Slurm: what it may stage. Idempotent (a retried submission writes
    the same grant again)."""
    for version, _name in versions:
        ensure_manifest(version)
    storage.write_grant(str(job_uuid), grant_text(cluster_user, versions))


def forget_grant(job_uuid) -> None:
    """A job has ended: its grant goes (idempotent)."""
    storage.remove_grant(str(job_uuid))


def prefer_for(version_ids) -> str:
    """Slurm's `--prefer` for a job on these versions: the feature of the largest one that some
    node holds (its bytes are the ones a cold start would copy), or "" when none is cached."""
    cached = (
        NodeCopy.objects.filter(version_id__in=list(version_ids))
        .order_by("-size_bytes", "version_id")
        .values_list("version_id", flat=True)
        .first()
    )
    return feature_for(cached) if cached else ""


def record_copy(node: str, version_id: int, size_bytes: int) -> bool:
    """`node` holds a verified copy of the version (a job staged it there just now). True when
    the node did not hold it before (its features must change)."""
    now = timezone.now()
    with transaction.atomic():
        updated = NodeCopy.objects.filter(node=node, version_id=version_id).update(last_used_at=now)
        if updated:
            return False
        if not DatasetVersion.objects.filter(pk=version_id).exists():
            return False
        _, created = NodeCopy.objects.get_or_create(
            node=node, version_id=version_id, defaults={"size_bytes": size_bytes, "last_used_at": now}
        )
        return created


def record_eviction(node: str, sha256: str) -> bool:
    """The node's tool removed its copy of this content (copies are named by the version's
    sha256) to make room. True when the portal thought it was there."""
    deleted, _ = NodeCopy.objects.filter(node=node, version__sha256=sha256).delete()
    return bool(deleted)


def _base_features(node: str) -> list[str] | None:
    for found in rest_client().list_nodes():
        if found.name == node:
            return [feature for feature in found.features if not feature.startswith(FEATURE_PREFIX)]
    return None


def desired_features(node: str, base: list[str]) -> list[str]:
    held = NodeCopy.objects.filter(node=node).order_by("version_id").values_list("version_id", flat=True)
    return [*base, *(feature_for(version_id) for version_id in held)]


def sync_node_features(node: str) -> bool:
    """The node's features: what Slurm says apart from ours, and `ds_<id>` for each copy the
    portal knows of. False when Slurm could not be asked or told (the sweep tries again)."""
    try:
        base = _base_features(node)
        if base is None:
            return False
        slurm_cli().set_node_features(node, desired_features(node, base))
    except (SlurmError, ValueError) as exc:
        log.warning("features of node %s not set: %s", node, exc)
        return False
    return True


def sync_all_node_features() -> int:
    """Every node whose features differ from its copies is set again; returns how many."""
    try:
        nodes = rest_client().list_nodes()
    except SlurmError as exc:
        log.warning("node features not checked: %s", exc)
        return 0
    changed = 0
    for node in nodes:
        base = [feature for feature in node.features if not feature.startswith(FEATURE_PREFIX)]
        wanted = desired_features(node.name, base)
        if sorted(wanted) != sorted(node.features):
            try:
                slurm_cli().set_node_features(node.name, wanted)
                changed += 1
            except (SlurmError, ValueError) as exc:
                log.warning("features of node %s not set: %s", node.name, exc)
    return changed


def cache_by_node() -> dict[str, list[NodeCopy]]:
    """{node: its copies, most recently used first}, for the nodes' pages."""
    result: dict[str, list[NodeCopy]] = {}
    for copy in NodeCopy.objects.select_related("version__dataset").order_by("node", "-last_used_at"):
        result.setdefault(copy.node, []).append(copy)
    return result


@dataclass(frozen=True)
class NodeCacheView:
    """One node's cache as a viewer may see it: the copies of datasets they may read by name,
    the others only counted (another user's dataset names are theirs)."""

    capacity_bytes: int
    used_bytes: int
    shown: list[NodeCopy]
    pinned: set[int]  # version ids an admin pinned on the node
    others: int
    others_bytes: int

    @property
    def percent(self) -> int:
        return min(100, self.used_bytes * 100 // self.capacity_bytes) if self.capacity_bytes else 0


def node_cache_view(node: str, capacity_gb: int, viewer, *, sees_all: bool) -> NodeCacheView:
    copies = list(NodeCopy.objects.filter(node=node).select_related("version__dataset").order_by("-last_used_at"))
    readable = set() if sees_all or not copies else set(own_datasets(viewer).values_list("pk", flat=True))
    shown = [copy for copy in copies if sees_all or copy.version.dataset_id in readable]
    hidden = [copy for copy in copies if copy not in shown]
    return NodeCacheView(
        capacity_bytes=capacity_gb * 10**9,
        used_bytes=sum(copy.size_bytes for copy in copies),
        shown=shown,
        pinned=set(NodePin.objects.filter(node=node).values_list("version_id", flat=True)),
        others=len(hidden),
        others_bytes=sum(copy.size_bytes for copy in hidden),
    )


def write_pins(node: str) -> None:
    """pins/<node>: the sha256 of every version pinned there (the copies the node's tool never
    evicts), sorted."""
    shas = sorted(set(NodePin.objects.filter(node=node).values_list("version__sha256", flat=True)))
    storage.write_pins(node, "".join(f"{sha}\n" for sha in shas))


def pins_by_node(version: DatasetVersion) -> dict[str, NodePin]:
    return {pin.node: pin for pin in NodePin.objects.filter(version=version)}
