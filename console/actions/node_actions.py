"""Admin actions on nodes, carried out in Slurm and recorded in the audit log whatever
their outcome, with the node's state before and after."""

from __future__ import annotations

from audit.log import record
from audit.models import AuditLog
from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import SlurmError
from cluster.models import Node


def _refresh_mirror() -> None:
    try:
        mirror_nodes(rest_client())
    except SlurmError:
        pass  # the mirror's last copy stands; the next pass retries


def node_state(name: str) -> dict:
    """The node as the mirror holds it: {"state", "flags", "reason"}, {} for an unknown node."""
    row = Node.objects.filter(name=name).values("state", "state_flags", "reason").first()
    return {"state": row["state"], "flags": row["state_flags"], "reason": row["reason"]} if row else {}


def _audited(actor, action: str, node: str, operation, *, reason: str = "") -> AuditLog:
    # The state Slurm has now, not the mirror's copy of up to one pass ago.
    _refresh_mirror()
    before = node_state(node)
    try:
        result = operation()
    except (SlurmError, ValueError) as exc:
        # The page shows words; the command and Slurm's own text stay in the entry's parameters.
        words = exc.public_message if isinstance(exc, SlurmError) else str(exc)
        return record(
            actor,
            action,
            node,
            before=before,
            after=before,
            reason=reason,
            succeeded=False,
            result=words,
            parameters={"slurm": str(exc)[:2000]},
        )
    _refresh_mirror()  # show the new state now, not at the next pass
    outcome = (getattr(result, "stdout", "") or "done").strip() or "done"
    return record(actor, action, node, before=before, after=node_state(node), reason=reason, result=outcome)


def drain(actor, node: str, reason: str) -> AuditLog:
    reason = reason.strip()
    return _audited(actor, "drain", node, lambda: slurm_cli().drain_node(node, reason), reason=reason)


def resume(actor, node: str) -> AuditLog:
    return _audited(actor, "resume", node, lambda: slurm_cli().resume_node(node))
