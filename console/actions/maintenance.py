"""Maintenance windows: an admin plans one (all nodes or some, a start, an end, a reason), and it
becomes a Slurm reservation with the MAINT flag through the one reservation gateway. Slurm then holds
every job whose time limit would cross the window (PENDING, reason "ReqNodeNotAvail, Reserved for
maintenance"); IGNORE_JOBS lets it be made while jobs run there. Users see it a day ahead (the
banner, console/context_processors.py). Planning and cancelling are audited; a window Slurm refuses
is not kept, and the admin reads Slurm's reason in words.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.utils import timezone

from audit.log import record
from cluster.clusters.reservation_gateway import reservation_gateway
from cluster.errors import SlurmError
from cluster.models import Node
from cluster.records.hostlist import HostlistError, expand_hostlist
from console.models import MaintenanceWindow
from jobs.models import Job, JobState

# Slurm's reservation is held for the Slurm users that run the work (its own account, root).
MAINT_USERS = ("root",)
MAX_DAYS_AHEAD = 366
MAX_HOURS = 7 * 24
# A day ahead, users see it coming.
ANNOUNCE_BEFORE = timedelta(hours=24)


class MaintenanceError(ValueError):
    def __init__(self, field: str, message: str, status: int = 400):
        super().__init__(message)
        self.field, self.message, self.status = field, message, status


@dataclass(frozen=True)
class WindowRequest:
    start: datetime
    end: datetime
    nodes: tuple[str, ...]
    reason: str


def check(request: WindowRequest, now: datetime | None = None) -> None:
    now = now or timezone.now()
    if request.start <= now:
        raise MaintenanceError("start", "A window starts in the future.")
    if request.end <= request.start:
        raise MaintenanceError("end", "A window ends after it starts.")
    if request.end - request.start > timedelta(hours=MAX_HOURS):
        raise MaintenanceError("end", f"A window lasts at most {MAX_HOURS // 24} days; plan two.")
    if request.start - now > timedelta(days=MAX_DAYS_AHEAD):
        raise MaintenanceError("start", "A window starts within a year.")
    if not request.reason.strip():
        raise MaintenanceError("reason", "Say why: users read it in the banner.")
    known = set(Node.objects.values_list("name", flat=True))
    unknown = sorted(set(request.nodes) - known)
    if unknown:
        raise MaintenanceError("nodes", f"No such node: {', '.join(unknown)}.")


def plan_window(admin, request: WindowRequest) -> MaintenanceWindow:
    """The window's row and its Slurm reservation, both or neither."""
    check(request)
    with transaction.atomic():
        window = MaintenanceWindow.objects.create(
            start=request.start,
            end=request.end,
            nodes=sorted(request.nodes),
            reason=request.reason.strip(),
            created_by=admin if getattr(admin, "pk", None) else None,
        )
        name = f"gpupool-maint-{window.pk}"
        minutes = int((request.end - request.start).total_seconds() // 60)
        try:
            reservation_gateway().create_node_reservation(
                name,
                nodes=list(request.nodes) or ["ALL"],
                users=list(MAINT_USERS),
                start=request.start,
                duration_minutes=minutes,
                flags=("MAINT", "IGNORE_JOBS"),
            )
        except SlurmError as exc:
            raise MaintenanceError("form", f"Slurm did not take the window: {exc.public_message}", 503) from exc
        MaintenanceWindow.objects.filter(pk=window.pk).update(slurm_name=name)
        window.slurm_name = name
        record(admin, "maintenance.plan", name, after=_state(window), reason=window.reason)
    return window


def cancel_window(admin, window_id: int) -> MaintenanceWindow:
    """Cancelled once (a conditional UPDATE), its reservation deleted; a reservation already gone is fine."""
    with transaction.atomic():
        window = MaintenanceWindow.objects.select_for_update().get(pk=window_id)
        if window.state == MaintenanceWindow.State.CANCELLED:
            return window
        if window.slurm_name:
            try:
                reservation_gateway().delete_reservation(window.slurm_name, check=False)
            except SlurmError as exc:
                raise MaintenanceError("form", f"Slurm did not remove the window: {exc.public_message}", 503) from exc
        MaintenanceWindow.objects.filter(pk=window.pk, state=MaintenanceWindow.State.PLANNED).update(
            state=MaintenanceWindow.State.CANCELLED
        )
        window.state = MaintenanceWindow.State.CANCELLED
        record(admin, "maintenance.cancel", window.slurm_name or f"window {window.pk}", before={"state": "planned"},
               after={"state": "cancelled"})  # fmt: skip
    return window


def _state(window: MaintenanceWindow) -> dict:
    return {
        "start": window.start.isoformat(),
        "end": window.end.isoformat(),
        "nodes": window.nodes or "all",
        "reason": window.reason,
    }


def ahead(now: datetime | None = None):
    """Planned windows not over yet, soonest first."""
    now = now or timezone.now()
    return MaintenanceWindow.objects.filter(state=MaintenanceWindow.State.PLANNED, end__gt=now).order_by("start")


def crossing_jobs(window: MaintenanceWindow) -> list[Job]:
    """The portal's running jobs on the window's nodes whose time limit runs past its start: Slurm lets
    them run (IGNORE_JOBS), so the admin decides whether to wait, warn their owners or cancel them."""
    running = Job.objects.on_cluster(None).filter(state=JobState.RUNNING, end_time__gt=window.start)
    held = set(window.nodes)
    jobs = []
    for job in running.select_related("owner").order_by("end_time"):
        try:
            nodes = set(expand_hostlist(job.nodes)) if job.nodes else set()
        except HostlistError:
            nodes = set()
        if not held or nodes & held:
            jobs.append(job)
    return jobs


def announced(now: datetime | None = None):
    """Planned windows that start within a day or are under way: what the banner says."""
    now = now or timezone.now()
    return MaintenanceWindow.objects.filter(
        state=MaintenanceWindow.State.PLANNED, start__lte=now + ANNOUNCE_BEFORE, end__gt=now
    )
