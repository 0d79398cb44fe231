"""Mirror Slurm's nodes into the Node table (idempotent: a pass with no change writes nothing)."""

from __future__ import annotations

from django.db import transaction

from cluster.models import Node
from cluster.slurmrest.client import SlurmRestClient
from cluster.types import Node as SlurmNode


def _node_fields(node: SlurmNode) -> dict:
    return {
        "state": node.state,
        "state_flags": ",".join(node.states[1:])[:200],
        "reason": node.reason[:500],
        "features": list(node.features),
        "partitions": list(node.partitions),
        "cpus": node.cpus,
        "alloc_cpus": node.alloc_cpus,
        "real_memory_mb": node.real_memory_mb,
        "alloc_memory_mb": node.alloc_memory_mb,
        "gpus": [
            {"type": group.gpu_type, "count": group.count, "used_indexes": list(group.used_indexes)}
            for group in node.gpus
        ],
        "shards_total": node.shards_total,
        "nvme_gb": node.nvme_gb,
        "shards_used": node.shards_used,
    }


def mirror_nodes(client: SlurmRestClient) -> int:
    """Returns how many node rows changed."""
    nodes = client.list_nodes()
    existing = {node.name: node for node in Node.objects.all()}
    changed = 0
    with transaction.atomic():
        for slurm_node in nodes:
            fields = _node_fields(slurm_node)
            row = existing.pop(slurm_node.name, None)
            if row is None:
                Node.objects.create(name=slurm_node.name, **fields)
                changed += 1
            elif any(getattr(row, key) != value for key, value in fields.items()):
                Node.objects.filter(pk=row.pk).update(**fields)
                changed += 1
        if existing:
            Node.objects.filter(name__in=list(existing)).delete()
            changed += len(existing)
    return changed
