"""Mirror Slurm's nodes into the Node table (idempotent: a pass with no change writes nothing)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from cluster.models import Node, NodePowerSpan, power_state_of
from cluster.records.types import Node as SlurmNode
from cluster.slurmrest.client import SlurmRestClient


def node_fields(node: SlurmNode) -> dict:
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
        "address": node.address,
    }


def mirror_nodes(client: SlurmRestClient) -> int:
    """Returns how many node rows changed."""
    nodes = client.list_nodes()
    existing = {node.name: node for node in Node.objects.all()}
    changed = 0
    with transaction.atomic():
        now = timezone.now()
        record_power_states({node.name: power_state_of(node.states[1:]) for node in nodes}, now=now)
        for slurm_node in nodes:
            fields = node_fields(slurm_node)
            row = existing.pop(slurm_node.name, None)
            # Since when nothing runs on it (the power policy powers down nodes idle long enough).
            idle = slurm_node.state == "IDLE" and not slurm_node.alloc_cpus
            fields["idle_since"] = ((row.idle_since if row else None) or now) if idle else None
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


def record_power_states(states: dict[str, str], now=None) -> int:
    """Close each node's open power span whose state changed and open one for the new state
    (a node seen for the first time starts its first span now). Returns how many changed."""
    now = now or timezone.now()
    open_spans = {span.node: span for span in NodePowerSpan.objects.filter(ended_at__isnull=True)}
    changed = 0
    for node, state in states.items():
        span = open_spans.get(node)
        if span is not None and span.state == state:
            continue
        if span is not None:
            NodePowerSpan.objects.filter(pk=span.pk, ended_at__isnull=True).update(ended_at=now)
        NodePowerSpan.objects.create(node=node, state=state, started_at=now)
        changed += 1
    return changed
