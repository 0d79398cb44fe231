"""The clusters as the portal shows them: each configured cluster (cluster/clusters/registry.py) with
what its probes last saw (ClusterStatus)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from cluster.clusters.registry import all_clusters
from cluster.models import ClusterStatus, Node


@dataclass(frozen=True)
class ClusterView:
    name: str
    primary: bool
    gpu_types: tuple[str, ...]
    time_zone: str
    state: str  # up, stale, down, unknown (ClusterStatus.state)
    slurm_release: str
    rest_version: str
    stale_since: datetime | None
    checked_at: datetime | None
    error: str


def cluster_views() -> list[ClusterView]:
    statuses = {row.name: row for row in ClusterStatus.objects.all()}
    views = []
    for config in all_clusters():
        status = statuses.get(config.name) or ClusterStatus(name=config.name)
        views.append(
            ClusterView(
                name=config.name,
                primary=config.primary,
                gpu_types=config.gpu_types,
                time_zone=config.time_zone,
                state=status.state,
                slurm_release=status.slurm_release,
                rest_version=status.api_version,
                stale_since=status.stale_since,
                checked_at=status.checked_at,
                error=status.last_error,
            )
        )
    return views


def clusters_not_answering() -> list[ClusterView]:
    """For the banner on every page: the clusters a user's view of is out of date."""
    if not ClusterStatus.objects.filter(answering=False, checked_at__isnull=False).exists():
        return []
    return [view for view in cluster_views() if view.state in ("stale", "down")]


def job_clusters() -> list[ClusterView]:
    """The clusters a user may send a job to, the portal's own first: [] when it is the only
    one (the job form then shows no choice, and asks the database nothing)."""
    taking = {cluster.name for cluster in all_clusters() if cluster.takes_jobs}
    if len(taking) < 2:
        return []
    return [view for view in cluster_views() if view.name in taking]


def nodes_by_gpu_type() -> dict[str, list[str]]:
    """The portal's own cluster's nodes (the mirror) by the GPU type they hold."""
    grouped: dict[str, list[str]] = {}
    for node in Node.objects.order_by("name"):
        grouped.setdefault(node.gpu_type, []).append(node.name)
    return grouped
