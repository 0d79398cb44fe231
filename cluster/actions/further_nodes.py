"""A further cluster's nodes (docs/clusters.md): read by that cluster's mirror pass every
SNAPSHOT_EVERY_SECONDS into `FurtherNode` rows, so a page never waits on another cluster's
slurmrestd. The `Node` table stays the portal's own cluster's (its reservations, power policy,
dataset caches and metering read it); node names repeat across clusters.

What pages show of every cluster's nodes comes from here: `current_nodes()` (the portal's own,
then each further cluster's read recently enough to be true), `nodes_in_pool()` (every node
of every cluster, however long ago read: the pool that was bought), and `node_named()` (one
node of a named cluster, for its page)."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import Max
from django.utils import timezone

from cluster.actions.mirror import node_fields
from cluster.clusters.registry import further_clusters_taking_jobs, primary_cluster_name
from cluster.models import FurtherNode, Node
from cluster.slurmrest.client import SlurmRestClient

SNAPSHOT_EVERY_SECONDS = 10
# Nodes read longer ago than this are not shown as they are now: the cluster's state is unknown
# by then (its node pages still show them, as of when they were read).
SNAPSHOT_KEEP_SECONDS = 120
# What a further cluster's row keeps of what the portal's own mirror keeps.
_KEPT = (
    "state",
    "state_flags",
    "reason",
    "features",
    "partitions",
    "cpus",
    "alloc_cpus",
    "real_memory_mb",
    "alloc_memory_mb",
    "gpus",
    "shards_total",
    "shards_used",
)


class UnknownCluster(LookupError):
    """No cluster of that name shows its nodes here."""


def shown_clusters() -> list[str]:
    """The further clusters whose nodes are read and shown: those that take portal jobs (their
    mirror pass reads them), in the registry's order."""
    return [cluster.name for cluster in further_clusters_taking_jobs()]


def last_read(cluster: str):
    return FurtherNode.objects.filter(cluster=cluster).aggregate(last=Max("seen_at"))["last"]


def snapshot_if_due(cluster: str, client: SlurmRestClient, now=None) -> bool:
    """Read the cluster's nodes when they were last read SNAPSHOT_EVERY_SECONDS ago or more.
    Returns whether it did. A row is written only where the node changed, then one UPDATE says
    when they were all seen: a pass that stops halfway leaves them as last seen, and the next
    pass reads them again. Each cluster's pass runs once at a time (jobs/tasks.py); every write
    is of what Slurm said, so a reader seeing some rows of this pass and some of the last sees
    nodes as they were moments apart. Raises SlurmError (the caller's pass records it)."""
    now = now or timezone.now()
    last = last_read(cluster)
    if last is not None and now - last < timedelta(seconds=SNAPSHOT_EVERY_SECONDS):
        return False
    nodes = client.list_nodes()
    existing = {row.name: row for row in FurtherNode.objects.filter(cluster=cluster)}
    for slurm_node in nodes:
        fields = {key: value for key, value in node_fields(slurm_node).items() if key in _KEPT}
        row = existing.pop(slurm_node.name, None)
        if row is None:
            # Seen when the others were, until the UPDATE below says this pass saw them all.
            FurtherNode.objects.create(cluster=cluster, name=slurm_node.name, seen_at=last or now, **fields)
        elif any(getattr(row, key) != value for key, value in fields.items()):
            FurtherNode.objects.filter(pk=row.pk).update(**fields)
    if existing:
        FurtherNode.objects.filter(cluster=cluster, name__in=list(existing)).delete()
    FurtherNode.objects.filter(cluster=cluster).update(seen_at=now)
    return True


def nodes_of(cluster: str, now=None) -> list[FurtherNode]:
    """The cluster's nodes as last read, if that was within SNAPSHOT_KEEP_SECONDS; else []."""
    now = now or timezone.now()
    fresh = now - timedelta(seconds=SNAPSHOT_KEEP_SECONDS)
    return list(FurtherNode.objects.filter(cluster=cluster, seen_at__gte=fresh))


def current_nodes(now=None) -> list[Node | FurtherNode]:
    """Every cluster's nodes as they are now: the portal's own (its mirror), then each further
    cluster's read within SNAPSHOT_KEEP_SECONDS (one not read since is left out: what it holds
    now is unknown)."""
    nodes: list[Node | FurtherNode] = list(Node.objects.all())
    for cluster in shown_clusters():
        nodes += nodes_of(cluster, now)
    return nodes


def nodes_in_pool() -> list[Node | FurtherNode]:
    """Every node of every shown cluster, however long ago it was read: what the pool has."""
    order = {name: position for position, name in enumerate(shown_clusters())}
    further = FurtherNode.objects.filter(cluster__in=list(order))
    return [*Node.objects.all(), *sorted(further, key=lambda node: (order[node.cluster], node.name))]


def resolve_cluster(cluster: str | None) -> str | None:
    """None for the portal's own cluster (asked by no name, or by its name), the name of a
    further cluster whose nodes are shown, or UnknownCluster: never the own one instead."""
    if cluster is None or cluster == primary_cluster_name():
        return None
    if cluster in shown_clusters():
        return cluster
    raise UnknownCluster(cluster)


def node_named(cluster: str | None, name: str) -> Node | FurtherNode | None:
    """The node `name` of `cluster` (None or the own name: the portal's own); None when that
    cluster has no such node; UnknownCluster when no shown cluster has that name."""
    further = resolve_cluster(cluster)
    if further is None:
        return Node.objects.filter(name=name).first()
    return FurtherNode.objects.filter(cluster=further, name=name).first()
