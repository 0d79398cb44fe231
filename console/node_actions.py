"""Admin actions on nodes, carried out in Slurm and recorded in the audit log whatever
their outcome."""

from __future__ import annotations

from cluster.errors import SlurmError
from cluster.mirror import mirror_nodes
from cluster.services import rest_client, slurm_cli
from console.models import AuditLog


def _audited(actor, action: str, target: str, parameters: dict, operation) -> AuditLog:
    entry = AuditLog(actor=actor, action=action, target=target, parameters=parameters)
    try:
        result = operation()
        entry.succeeded = True
        entry.result = (result.stdout or "done").strip()[:2000] if hasattr(result, "stdout") else "done"
    except (SlurmError, ValueError) as exc:
        entry.result = str(exc)[:2000]
    entry.save()
    if entry.succeeded:
        try:
            mirror_nodes(rest_client())  # show the new state now, not at the next pass
        except SlurmError:
            pass
    return entry


def drain(actor, node: str, reason: str) -> AuditLog:
    reason = reason.strip()
    return _audited(actor, "drain", node, {"reason": reason}, lambda: slurm_cli().drain_node(node, reason))


def resume(actor, node: str) -> AuditLog:
    return _audited(actor, "resume", node, {}, lambda: slurm_cli().resume_node(node))
