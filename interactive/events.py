"""A session's state, pushed to its owner's open pages (the jobs socket, jobs/live/consumers.py)."""

from __future__ import annotations

from interactive.kinds import kind_for
from interactive.models import InteractiveSession, SessionState
from interactive.origins import session_origin
from jobs.live.events import publish_to_user


def session_url(session: InteractiveSession) -> str | None:
    """Where its owner opens a ready session (its app's landing page at its own origin); None
    while it is not ready."""
    if session.state != SessionState.READY:
        return None
    return f"{session_origin(session.host_key)}{kind_for(session.kind).landing_path}"


def session_payload(session: InteractiveSession) -> dict:
    job = session.job
    state = session.state
    return {
        "id": session.pk,
        "kind": session.kind,
        "state": state,
        "job": job.pk,
        "job_state": job.state,
        "reason_text": job.reason_text if state == "queued" else "",
        "nodes": job.nodes,
        "url": session_url(session),
        "ready_at": session.ready_at.isoformat() if session.ready_at else None,
        "server_start_seconds": str(session.server_start_seconds) if session.server_start_seconds is not None else None,
        "idle_warned_at": session.idle_warned_at.isoformat() if session.idle_warned_at else None,
        "stop_reason": session.stop_reason,
        "error": session.error or job.error,
    }


def publish_session(session_id: int) -> None:
    session = InteractiveSession.objects.select_related("job").filter(pk=session_id).first()
    if session is not None:
        publish_to_user(session.owner_id, {"type": "session.update", "session": session_payload(session)})
