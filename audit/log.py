"""The one way to write the audit log."""

from __future__ import annotations

from typing import Any

from audit.models import AuditLog


def record(
    actor,
    action: str,
    target: str,
    *,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
    reason: str = "",
    parameters: dict[str, Any] | None = None,
    succeeded: bool = True,
    result: str = "",
) -> AuditLog:
    """Append one entry. `actor` None means the system did it (a task, a signal without a
    request); callers inside a transaction get the entry rolled back with their change."""
    return AuditLog.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        action=action[:50],
        target=str(target)[:200],
        before=before or {},
        after=after or {},
        reason=reason[:2000],
        parameters=parameters or {},
        succeeded=succeeded,
        result=result[:2000],
    )
