"""The admins' maintenance page: plan a window (all nodes or some), see the windows ahead with the running
jobs that would cross each, cancel one (asked first); start, follow and stop a rolling restart; the
canary. Every write is console.actions.maintenance's, rolling_restart's or canary's, as the API's
(/api/v1/maintenance/) is."""

from __future__ import annotations

from datetime import datetime

from django.contrib import messages
from django.db import transaction
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from cluster.models import Node
from console.actions import canary, maintenance, rolling_restart
from console.models import CanaryRun, MaintenanceWindow, RollingRestartStep
from console.tasks import advance_rolling_restart

RECENT = 10


def _when(text: str) -> datetime | None:
    """A datetime-local field's value, in the portal's time zone."""
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


@role_required(Role.ADMIN)
def maintenance_page(request):
    errors: dict[str, str] = {}
    values = {"start": "", "end": "", "reason": "", "nodes": []}
    if request.method == "POST":
        values = {
            "start": request.POST.get("start", ""),
            "end": request.POST.get("end", ""),
            "reason": request.POST.get("reason", ""),
            "nodes": request.POST.getlist("nodes"),
        }
        start, end = _when(values["start"]), _when(values["end"])
        if start is None:
            errors["start"] = "Give the start as a date and time."
        if end is None:
            errors["end"] = "Give the end as a date and time."
        if not errors:
            request_ = maintenance.WindowRequest(start, end, tuple(values["nodes"]), values["reason"][:300])
            try:
                window = maintenance.plan_window(request.user, request_)
            except maintenance.MaintenanceError as exc:
                errors[exc.field] = exc.message
            else:
                messages.success(
                    request, f"Window planned: Slurm holds {window.slurm_name} from {window.start:%Y-%m-%d %H:%M}."
                )
                return redirect("console:maintenance")
    windows = [(window, maintenance.crossing_jobs(window)) for window in maintenance.ahead()]
    nodes = sorted(Node.objects.all(), key=lambda node: (node.gpu_type, node.name))
    latest = canary.latest()
    rolling = rolling_restart.latest()
    past = MaintenanceWindow.objects.exclude(pk__in=[window.pk for window, _ in windows]).order_by("-start")[:RECENT]
    context = {
        "windows": windows,
        "past": past,
        "nodes": nodes,
        # Nodes Slurm runs no new job on, whoever took them out (a site's own restarts included).
        "out_of_service": [node for node in nodes if node.out_of_service],
        # The page follows a restart live, the portal's or a site's own (Slurm's REBOOT flags).
        "restarting": any("REBOOT" in node.state_flags for node in nodes),
        "values": values,
        "errors": errors,
        "time_zone": timezone.get_current_timezone_name(),
        "canary": latest,
        "rolling": rolling,
        "rolling_first": rolling_restart.first_tenth(len(rolling.steps.all())) if rolling else 0,
        "rolling_done": sum(step.state == RollingRestartStep.State.DONE for step in rolling.steps.all())
        if rolling
        else 0,
        # The canary's part of the page is read again while a check runs (static/js/live_parts.js).
        "canary_running": latest is not None and any(check.state == "running" for check in latest.checks.all()),
    }
    return render(request, "console/maintenance.html", context, status=400 if errors else 200)


@role_required(Role.ADMIN)
@require_POST
def maintenance_cancel(request, pk: int):
    try:
        window = maintenance.cancel_window(request.user, pk)
    except MaintenanceWindow.DoesNotExist:
        messages.error(request, "No such window.")
    except maintenance.MaintenanceError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Window {window.slurm_name or window.pk} cancelled: its nodes are back for jobs.")
    return redirect("console:maintenance")


@role_required(Role.ADMIN)
@require_POST
def canary_start(request):
    try:
        run = canary.start(request.user, CanaryRun.Trigger.MANUAL, "asked on the maintenance page")
    except canary.CanaryRefused as exc:
        messages.error(request, str(exc))
    else:
        messages.success(request, f"Canary {run.pk} started: one short job per node. Results appear below as they end.")
    return redirect("console:maintenance")


@role_required(Role.ADMIN)
@require_POST
def rolling_restart_start(request):
    try:
        restart = rolling_restart.start(
            request.user,
            request.POST.getlist("restart_nodes"),
            request.POST.get("reason", ""),
            canary_first=request.POST.get("canary_first") == "on",
        )
    except rolling_restart.RollingRestartError as exc:
        messages.error(request, exc.message)
    else:
        transaction.on_commit(lambda: advance_rolling_restart.delay(restart.pk))
        first = restart.steps.first()
        messages.success(request, f"Rolling restart {restart.pk} started: {first.node} first. Progress shows below.")
    return redirect("console:maintenance")


@role_required(Role.ADMIN)
@require_POST
def rolling_restart_stop(request, pk: int):
    try:
        rolling_restart.stop(request.user, pk)
    except rolling_restart.RollingRestartError as exc:
        messages.error(request, exc.message)
    else:
        messages.success(request, f"Rolling restart {pk} stopped: no further node is asked.")
    return redirect("console:maintenance")
