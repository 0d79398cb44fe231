"""Idle culling: a ready session whose kernels did nothing and whose GPUs stayed under
SESSION_IDLE_GPU_PERCENT for its plan's `session_idle_minutes` is warned (on the notebook page,
by the proxy's notice script, and by e-mail), then stopped SESSION_IDLE_WARNING_SECONDS later
unless it was used in between; using it clears the warning.

Activity is what the server says of its kernels (`GET /api/kernels`: each one's last message and
whether it is busy now) and what telemetry says of the job's GPUs (a sample at or over the
threshold: a kernel's background thread training counts). The server runs in the user's job, so
its word is the user's: a kernel it calls busy counts only while the session's GPUs moved at all
in the idle window (a sample of any compute or memory traffic); a server that says "busy" for
ever over still GPUs no longer keeps the GPUs held. A server that does not answer says
nothing: its session is judged by its GPUs alone, so a crashed server does not bill for ever.

Every app's session also counts what the proxy saw its owner do (interactive/browser_activity.py):
a page of it opened or reloaded, and for VS Code (whose server has no kernels to ask) what its
workbench sent of its own accord, never its heartbeat. A TensorBoard is read, not run: a board
left open, not looked at again, is warned and stopped like an idle notebook.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db import transaction
from django.db.models import Max, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from interactive.actions import stop
from interactive.actions.starting import ask_server
from interactive.events import publish_session
from interactive.models import InteractiveSession
from jobs.models import JobState
from plans.catalog import plan_for
from telemetry.models import GpuSampleRaw

log = logging.getLogger(__name__)

KERNELS_PATH = "/api/kernels"


def kernel_activity(session: InteractiveSession, now: datetime, *, gpus_moved: bool = True) -> datetime | None:
    """The newest kernel activity (`now` while one is busy and `gpus_moved`); None when the
    server does not say."""
    answer = ask_server(session.address, session.port, session.token, KERNELS_PATH)
    if answer is None or answer[0] != 200:
        return None
    try:
        kernels = json.loads(answer[1])
    except ValueError:
        return None
    newest = None
    for kernel in kernels if isinstance(kernels, list) else ():
        if not isinstance(kernel, dict):
            continue
        if kernel.get("execution_state") == "busy" and gpus_moved:
            return now
        seen = parse_datetime(str(kernel.get("last_activity") or ""))
        if seen is not None and (newest is None or seen > newest):
            newest = seen
    return newest


def terminal_activity(session: InteractiveSession, *, gpus_moved: bool) -> list[datetime]:
    """A terminal's own rule (interactive/terminal_activity.py): a keystroke is use; output alone is
    use only while the session's GPUs moved in the idle window (a `watch` over still GPUs is not)."""
    moments = [session.terminal_input_at]
    if gpus_moved:
        moments.append(session.terminal_output_at)
    return [moment for moment in moments if moment is not None]


def _samples_of(session: InteractiveSession, since: datetime, now: datetime):
    """Telemetry's samples of the GPUs the session's job holds, from `since` to `now`."""
    held = Q(pk__in=[])
    for node, indexes in (session.job.gpu_allocation or {}).items():
        held |= Q(node=node, index__in=list(indexes))
    return GpuSampleRaw.objects.filter(held, time__gte=since, time__lte=now)


def gpu_busy_at(session: InteractiveSession, since: datetime, now: datetime) -> datetime | None:
    """The newest moment since `since` a GPU of the session's job computed at or over the threshold."""
    return (
        _samples_of(session, since, now)
        .filter(compute_util__gte=settings.SESSION_IDLE_GPU_PERCENT)
        .aggregate(newest=Max("time"))["newest"]
    )


def gpus_moved(session: InteractiveSession, since: datetime, now: datetime) -> bool:
    """Whether a GPU of the session's job did anything at all since `since` (any compute or memory
    traffic in a sample): what a kernel the server calls busy must show."""
    return _samples_of(session, since, now).filter(Q(compute_util__gt=0) | Q(memory_util__gt=0)).exists()


def cull_idle_sessions(now: datetime | None = None) -> dict:
    """One pass over the ready sessions; `now` is a parameter so a test can be half an hour later."""
    now = now or timezone.now()
    warning = timedelta(seconds=settings.SESSION_IDLE_WARNING_SECONDS)
    counts = {"looked": 0, "warned": 0, "stopped": 0, "used_again": 0}
    # A session stopped for idleness whose job still runs (Slurm did not take the cancel) is
    # cancelled again.
    sessions = InteractiveSession.objects.select_related("job", "owner").filter(
        ready_at__isnull=False,
        stop_reason__in=["", InteractiveSession.StopReason.IDLE],
        job__state=JobState.RUNNING,
    )
    idle_minutes: dict[int, int] = {}
    for session in sessions:
        counts["looked"] += 1
        if session.stop_reason:
            _stop_idle(session)
            counts["stopped"] += 1
            continue
        if session.owner_id not in idle_minutes:
            idle_minutes[session.owner_id] = plan_for(session.owner).session_idle_minutes
        limit = timedelta(minutes=idle_minutes[session.owner_id])
        moved = gpus_moved(session, now - limit, now)
        kernels = kernel_activity(session, now, gpus_moved=moved)
        moments = [
            session.ready_at,
            session.last_activity_at,
            session.browser_input_at,
            kernels,
            *terminal_activity(session, gpus_moved=moved),
        ]
        moments.append(gpu_busy_at(session, now - limit - warning, now))
        last = max(moment for moment in moments if moment is not None)
        seen = {}
        if kernels is not None and (session.kernel_activity_at is None or kernels > session.kernel_activity_at):
            seen["kernel_activity_at"] = kernels
        if session.last_activity_at is None or last > session.last_activity_at:
            seen["last_activity_at"] = last
        if seen:
            InteractiveSession.objects.filter(pk=session.pk).update(**seen)
        warned = session.idle_warned_at
        if warned is not None and last > warned:
            if InteractiveSession.objects.filter(pk=session.pk, idle_warned_at=warned).update(idle_warned_at=None):
                counts["used_again"] += 1
                publish_session(session.pk)
        elif warned is not None and now - warned >= warning:
            _stop_idle(session)
            counts["stopped"] += 1
        elif warned is None and now - last >= limit:
            with transaction.atomic():
                if InteractiveSession.objects.filter(pk=session.pk, idle_warned_at__isnull=True).update(
                    idle_warned_at=now
                ):
                    counts["warned"] += 1
                    transaction.on_commit(lambda session=session, limit=limit: _tell_warned(session, limit, warning))
    return counts


def _stop_idle(session: InteractiveSession) -> None:
    try:
        stop(session, reason=InteractiveSession.StopReason.IDLE)
    except Exception:
        # Slurm did not take the cancel: the next pass tries again (the reason is recorded once).
        log.exception("session %s: the idle stop failed", session.pk)
    publish_session(session.pk)


def _tell_warned(session: InteractiveSession, limit: timedelta, warning: timedelta) -> None:
    publish_session(session.pk)
    if not session.owner.email:
        return
    minutes = int(limit.total_seconds() // 60)
    try:
        send_mail(
            f"Your {session.kind} session will stop in {int(warning.total_seconds() // 60)} minutes",
            f"Your session (job {session.job.slurm_job_id or session.job_id}) has been idle for {minutes} minutes: "
            f"nothing ran or was done in it and its GPUs stayed under {settings.SESSION_IDLE_GPU_PERCENT} %.\n"
            f"It stops in {int(warning.total_seconds() // 60)} minutes unless you use it. "
            f"Open it from {settings.SITE_URL}/sessions/{session.pk}/ to keep it.",
            None,
            [session.owner.email],
        )
    except Exception:
        log.exception("session %s: the idle warning e-mail failed", session.pk)


# The GPU emulator (dev clusters only) draws a session's GPUs busy this long after its kernels
# last did something, idle otherwise: kernels are what moves a notebook's GPU.
EMULATED_BUSY_AFTER_KERNEL = timedelta(minutes=2)


def emulated_idle_sessions(now: datetime) -> set[int]:
    """Ids of running session jobs whose kernels did nothing lately (telemetry.emulator)."""
    recent = now - EMULATED_BUSY_AFTER_KERNEL
    return set(
        InteractiveSession.objects.filter(job__state=JobState.RUNNING)
        .exclude(kernel_activity_at__gte=recent)
        .values_list("job_id", flat=True)
    )
