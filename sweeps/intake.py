"""The path of a new sweep, from the API and the form alike: the base job checked as any job
(jobs.submission.spec), the parameters (sweeps.parameters), the throttle and the metric,
counted as one submission against the rate limit."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from foundation.ratelimit import refund
from jobs import actions as job_actions
from jobs.models import Sweep
from jobs.submission.intake import count_submission
from jobs.submission.spec import JobSpec, SpecError, SpecPolicy, parse_job_spec
from plans.catalog import plan_for
from sweeps import actions
from sweeps.parameters import Grid, parse_parameter_lines, parse_sweep_parameters

# The fields of a sweep beside the base job's.
SWEEP_FIELDS = ("parameters", "points", "throttle", "metric", "metric_goal", "group", "reservation")
METRIC_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,63}", re.ASCII)


@dataclass(frozen=True)
class SweepRequest:
    spec: JobSpec
    grid: Grid
    throttle: int
    metric_name: str
    metric_goal: str


def parse_sweep(data: Mapping[str, Any], *, plan, policy: SpecPolicy) -> SweepRequest:
    """Every problem of a sweep at once, by field (SpecError), or the checked request."""
    job_data = {key: value for key, value in data.items() if key not in SWEEP_FIELDS}
    errors: dict[str, list[str]] = {}
    spec = None
    try:
        spec = parse_job_spec(job_data, plan=plan, policy=policy)
    except SpecError as exc:
        errors.update(exc.errors)
    grid = None
    try:
        parameters = data.get("parameters")
        if isinstance(parameters, str):  # the form's lines
            parameters = parse_parameter_lines(parameters)
        reserved = tuple(spec.environment) if spec else ()
        grid = parse_sweep_parameters(
            {"parameters": parameters, "points": data.get("points")},
            max_points=settings.SWEEP_MAX_POINTS,
            reserved=reserved,
        )
    except SpecError as exc:
        errors.update(exc.errors)
    throttle = _whole(data.get("throttle"), "throttle", errors, default=0)
    if grid is not None and throttle is not None and throttle > len(grid):
        errors.setdefault("throttle", []).append(f"at most the sweep's {len(grid)} tasks (0: no limit)")
    metric_name = data.get("metric") or ""
    if not isinstance(metric_name, str) or (metric_name and not METRIC_NAME_RE.fullmatch(metric_name)):
        errors.setdefault("metric", []).append("a metric name: letters, digits, _ . - (up to 64)")
    if data.get("reservation") not in (None, ""):
        errors.setdefault("reservation", []).append("A sweep's tasks queue as usual; they do not run in a reservation.")
    metric_goal = data.get("metric_goal") or "min"
    if metric_goal not in ("min", "max"):
        errors.setdefault("metric_goal", []).append("min (lower is better) or max")
    if errors:
        raise SpecError(errors)
    return SweepRequest(spec, grid, throttle or 0, metric_name, metric_goal)


def _whole(value, field: str, errors: dict, *, default: int) -> int | None:
    if value in (None, ""):
        return default
    if isinstance(value, str) and value.isdigit() and len(value) < 8:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        errors.setdefault(field, []).append("must be a whole number, 0 or more")
        return None
    return value


def accept(request, data: Mapping[str, Any]) -> Sweep:
    """Validate, rate limit (a sweep counts as one submission), check the plan and record the
    sweep. Raises SpecError, intake.RateLimited, QuotaExceeded or NotProvisioned, having
    changed nothing."""
    plan = plan_for(request.user)
    parsed = parse_sweep(data, plan=plan, policy=SpecPolicy.from_settings())
    group_id = data["group"] if "group" in data else job_actions.DEFAULT_GROUP
    counted = count_submission(request)
    try:
        return actions.create_sweep(
            request.user,
            parsed.spec,
            parsed.grid,
            name=parsed.spec.name,
            throttle=parsed.throttle,
            group_id=group_id,
            plan=plan,
            metric_name=parsed.metric_name,
            metric_goal=parsed.metric_goal,
        )
    except Exception:
        for scope, key in counted:
            refund(scope, key)
        raise
