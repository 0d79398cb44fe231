"""The sweep pages: the list, one sweep (its grid of tasks live, counts, cost, metric plot,
steering), and the cells the page polls when its socket is down. The owner's only: another
user's sweep is a 404."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from foundation.ratelimit import refund
from foundation.words import counted
from jobs import actions as job_actions
from jobs.costs import costs_for
from jobs.diagnosis.reasons import explain_reason
from jobs.models import FINAL_STATES, Job, Sweep, state_label
from jobs.submission import intake as job_intake
from jobs.submission.quota import QuotaExceeded
from jobs.submission.spec import SpecError, job_spec_from_dict
from sweeps import actions, queries
from sweeps.parameters import command_shown, value_text

# The task table shows at most this many rows (filter or sort to see others); the grid shows all.
TABLE_ROWS = 500


@login_required
def sweep_list(request):
    sweeps = list(queries.own_sweeps(request.user)[:100])
    counts = {sweep.pk: queries.state_counts(sweep) for sweep in sweeps}
    rows = [(sweep, counts[sweep.pk]) for sweep in sweeps]
    return render(request, "sweeps/list.html", {"rows": rows})


def _own(request, pk: int) -> Sweep:
    return get_object_or_404(queries.own_sweeps(request.user), pk=pk)


def _filtered(sweep: Sweep, rows: list[dict], params) -> tuple[list[dict], dict]:
    chosen = {name: params.get(f"p.{name}", "") for name in sweep.grid["names"]}
    state, sort = params.get("state", ""), params.get("sort", "index")
    try:
        rows = queries.select_tasks(sweep, rows, state=state, sort=sort, values=chosen)
    except queries.UnknownSort:
        # A hand-edited address: the page shows the tasks by index rather than an error.
        rows = queries.select_tasks(sweep, rows, state=state, values=chosen)
    return rows, {"state": state, "sort": sort, "parameters": chosen}


@login_required
def sweep_detail(request, pk: int):
    sweep = _own(request, pk)
    rows = queries.task_rows(sweep)
    shown, filters = _filtered(sweep, list(rows), request.GET)
    shown = shown[:TABLE_ROWS]
    jobs = {job.pk: job for job in Job.objects.filter(pk__in=[row["id"] for row in shown])}
    costs = costs_for(list(jobs.values()))
    for row in shown:
        cost = costs.get(row["id"])
        row["cost"] = cost.cost if cost and cost.cost is not None else (cost.cost_so_far if cost else None)
        # Why a task waits; an ended task's last pending reason is history, not news.
        waiting = row["state"] in ("PENDING", "SUBMITTING")
        row["reason_text"] = explain_reason(row["state_reason"]) if waiting and row["state_reason"] else ""
        row["state_label"] = state_label(row["state"])
        row["values"] = [value_text(row["parameters"][name]) for name in sweep.grid["names"]]
    grid_names = sweep.grid["names"]
    spec = job_spec_from_dict(sweep.spec)
    arrays = list(sweep.arrays.all())
    # A live re-read (static/js/live_parts.js) swaps the parts that change and leaves the grid
    # to the socket: the cells' JSON is not drawn again.
    live_reread = bool(request.headers.get("X-Live-Parts"))
    context = {
        "sweep": sweep,
        "names": grid_names,
        "values_by_name": {
            name: sorted({value_text(point[i]) for point in sweep.grid["points"]}, key=_natural)
            for i, name in enumerate(grid_names)
        },
        # Drawn by static/js/sweep_live.js: 10,000 cells as markup cost the template seconds.
        "cells": [] if live_reread else [[row["sweep_index"], row["id"], row["state"]] for row in rows],
        "rows": shown,
        "shown_all": len(shown) < TABLE_ROWS,
        "filters": filters,
        "counts": sorted(queries.state_counts(sweep).items()),
        "cost": queries.sweep_cost(sweep),
        "quote": queries.quote_sweep(sweep.owner, spec, sweep.point_count, sweep.group),
        "best": queries.best_task(sweep),
        "arrays": arrays,
        # Something can still change: a task unfinished, or an array not yet in Slurm.
        "changing": any(row["state"] not in FINAL_STATES for row in rows)
        or any(array.slurm_array_job_id is None and not array.error for array in arrays),
        "failed": sum(1 for row in rows if row["state"] in actions.FAILED_STATES),
        "pending": sum(1 for row in rows if row["state"] in ("SUBMITTING", "PENDING")),
        "series": _plot_series(sweep),
        "example_command": command_shown(spec.command, rows[0]["parameters"]) if rows else "",
        "table_rows": TABLE_ROWS,
        # The cells' links: one reverse, not one per task (10,000 of them cost seconds).
        "jobs_base": reverse("jobs:list"),
    }
    return render(request, "sweeps/detail.html", context)


def _natural(text: str):
    try:
        return (0, float(text), "")
    except ValueError:
        return (1, 0.0, text)


def _plot_series(sweep: Sweep) -> dict:
    if not sweep.metric_name:
        return {}
    return {
        "metric": sweep.metric_name,
        "series": {name: [list(point) for point in points] for name, points in queries.metric_series(sweep).items()},
    }


@login_required
def sweep_cells(request, pk: int):
    """The grid's cells and counts: what the page polls while its socket is down."""
    sweep = _own(request, pk)
    return JsonResponse(
        {
            "cells": queries.compact_states(sweep),
            "counts": queries.state_counts(sweep),
            "throttle": sweep.throttle,
        }
    )


@login_required
@require_POST
def sweep_throttle(request, pk: int):
    sweep = _own(request, pk)
    text = request.POST.get("throttle", "").strip()
    try:
        actions.set_throttle(request.user, sweep, int(text) if text.isdigit() and len(text) < 8 else -1)
        throttle = int(text or 0)
        messages.success(
            request,
            f"Throttle set: {counted(throttle, 'task')} at once."
            if throttle
            else "Throttle off: as many tasks at once as your plan allows.",
        )
    except actions.SweepRefused as exc:
        messages.error(request, str(exc))
    return redirect("sweeps:sweep", pk=sweep.pk)


@login_required
@require_POST
def sweep_cancel(request, pk: int):
    sweep = _own(request, pk)
    pending_only = request.POST.get("which") != "all"
    try:
        actions.cancel_sweep(request.user, sweep, pending_only=pending_only)
        messages.success(request, "Pending tasks cancelled." if pending_only else "Every task cancelled.")
    except actions.SweepRefused as exc:
        messages.error(request, str(exc))
    return redirect("sweeps:sweep", pk=sweep.pk)


@login_required
@require_POST
def sweep_rerun(request, pk: int):
    sweep = _own(request, pk)
    chosen = [int(value) for value in request.POST.getlist("tasks") if value.isdigit() and len(value) < 8]
    try:
        indexes = actions.rerun_tasks(request.user, sweep, chosen or None)
        messages.success(
            request, f"Running {counted(len(indexes), 'task')} again: {', '.join(map(str, indexes[:20]))}."
        )
    except (actions.SweepRefused, QuotaExceeded, job_actions.NotProvisioned) as exc:
        messages.error(request, str(exc))
    except SpecError as exc:
        messages.error(request, exc.summary())
    return redirect("sweeps:sweep", pk=sweep.pk)


@login_required
@require_POST
def sweep_clone(request, pk: int):
    sweep = _own(request, pk)
    try:
        counted = job_intake.count_submission(request)
    except job_intake.RateLimited as exc:
        messages.error(request, str(exc))
        return redirect("sweeps:sweep", pk=sweep.pk)
    try:
        clone = actions.clone_sweep(request.user, sweep)
    except (QuotaExceeded, job_actions.NotProvisioned, SpecError) as exc:
        for scope, key in counted:
            refund(scope, key)
        messages.error(request, exc.summary() if isinstance(exc, SpecError) else str(exc))
        return redirect("sweeps:sweep", pk=sweep.pk)
    messages.success(request, f"Sweep {clone.name} submitted again ({clone.point_count} tasks).")
    return redirect("sweeps:sweep", pk=clone.pk)
