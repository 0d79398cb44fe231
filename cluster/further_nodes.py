"""A further cluster's nodes as the heatmap shows them (docs/clusters.md): a snapshot taken by
that cluster's mirror pass and kept in the shared cache, so a page never waits on another
cluster's slurmrestd. The Node table (and everything built on it: node pages, power, telemetry)
is the portal's own cluster's alone; node names repeat across clusters."""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import caches

from cluster.slurmrest.client import SlurmRestClient

SNAPSHOT_EVERY_SECONDS = 10
# A snapshot older than this is not shown: the cluster's state is unknown by then.
SNAPSHOT_KEEP_SECONDS = 120
_KEY = "gpupool:further-nodes:"


def _cache():
    return caches[settings.HEATMAP_CACHE]


def snapshot_if_due(cluster: str, client: SlurmRestClient) -> bool:
    """Read the cluster's nodes when the last snapshot is older than SNAPSHOT_EVERY_SECONDS.
    Returns whether it did. Raises SlurmError (the caller's pass records it)."""
    last = _cache().get(_KEY + cluster)
    if last is not None and time.time() - last["taken"] < SNAPSHOT_EVERY_SECONDS:
        return False
    nodes = [
        {
            "name": node.name,
            "state": node.state + (f"+{','.join(node.states[1:])}" if node.states[1:] else ""),
            "reason": node.reason,
            "gpus": [
                {"type": group.gpu_type, "count": group.count, "used": list(group.used_indexes)} for group in node.gpus
            ],
        }
        for node in client.list_nodes()
    ]
    _cache().set(_KEY + cluster, {"taken": time.time(), "nodes": nodes}, timeout=SNAPSHOT_KEEP_SECONDS)
    return True


def nodes_of(cluster: str) -> list[dict]:
    """The last snapshot's nodes ([] when there is none recent)."""
    snapshot = _cache().get(_KEY + cluster)
    return snapshot["nodes"] if snapshot else []
