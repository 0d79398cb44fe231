"""Which cluster a new job goes to: the submission's `cluster` (absent: the portal's own; a
name; or `any`: the earliest expected start, cluster/clusters/placement.py), checked against what only
the portal's own cluster offers (docs/clusters.md, "Jobs on further clusters")."""

from __future__ import annotations

from dataclasses import dataclass, replace

from cluster.clusters.placement import JobShape, choose, estimate_where_answering
from cluster.clusters.registry import all_clusters, primary_cluster_name
from jobs.submission.spec import JobSpec, SpecError

ANY = "any"


@dataclass(frozen=True)
class ClusterChoice:
    name: str
    reason: str  # shown to the owner (Job.placement); empty for the portal's own by default
    # The portal chose it (`any`), so it may move once while it waits (jobs/moves.py).
    movable: bool = False


def home_only_reason(spec: JobSpec, *, reserved: bool, group, capped_plan: bool) -> str:
    """Why this job must run on the portal's own cluster, or "". What a further cluster lacks:
    the reservation's nodes, the dataset cache, the spot partition, and the GPU-hour caps that
    Slurm enforces per cluster (a free plan's hours or a group's allocation would count afresh
    on each cluster, a second allowance)."""
    if reserved:
        return "a job in a reservation runs on its reserved GPUs"
    if spec.datasets:
        return "datasets are cached on the portal's own cluster"
    if spec.spot:
        return "spot jobs take idle GPUs of the portal's own cluster"
    if group is not None:
        return "a group's jobs run within its allocation on the portal's own cluster"
    if capped_plan:
        return "your plan's included GPU hours are counted on the portal's own cluster"
    return ""


def cluster_asked_by(job) -> str:
    """What a copy of `job` (a clone) asks for as its cluster, as its owner chose for the job:
    `any` where the portal placed it (and may place the copy elsewhere), the cluster's name where
    the job runs on a further cluster by its owner's choice, "" (the portal's own) otherwise."""
    if job.movable or job.moved_from:
        return ANY
    return "" if job.cluster == primary_cluster_name() else job.cluster


def choose_cluster(requested, spec: JobSpec, *, partition: str, home_only: str) -> ClusterChoice:
    """The cluster for this job, or SpecError on `cluster`. Asking each cluster for its estimate
    (`any`) runs its CLI: call this outside any transaction."""
    own = primary_cluster_name()
    if requested is None or requested in ("", own):
        return ClusterChoice(own, "")
    if not isinstance(requested, str):
        raise SpecError({"cluster": ["A cluster's name, or any."]})
    if requested == ANY:
        if home_only:
            return ClusterChoice(own, f"{own}: {home_only}.")
        return replace(_earliest(spec, partition), movable=True)
    clusters = {cluster.name: cluster for cluster in all_clusters()}
    cluster = clusters.get(requested)
    if cluster is None:
        raise SpecError({"cluster": [f"No cluster is named {requested[:40]!r}; /api/v1/clusters/ lists them."]})
    if home_only:
        raise SpecError({"cluster": [f"This job runs on {own}: {home_only}."]})
    if not cluster.offers(spec.gpu.gpu_type):
        raise SpecError({"cluster": [f"{requested} takes no {spec.gpu.gpu_type} jobs from the portal."]})
    return ClusterChoice(requested, f"You chose {requested}.")


def _earliest(spec: JobSpec, partition: str) -> ClusterChoice:
    candidates = [cluster for cluster in all_clusters() if cluster.offers(spec.gpu.gpu_type)]
    shape = JobShape(partition, spec.gpu.tres_per_node(), spec.time_limit_minutes)
    placement = choose(estimate_where_answering(candidates, shape), own=primary_cluster_name())
    if placement.cluster is None:
        raise SpecError({"cluster": [placement.reason]})
    return ClusterChoice(placement.cluster, placement.reason[:500])  # Job.placement
