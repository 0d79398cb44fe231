"""What the sweep page and the sweep API read: the current task of every point, counts by state,
the cost, the best task by the metric, the quote. A fixed number of queries per sweep,
whatever its size."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from decimal import Decimal

from jobs.costs import RunQuote, costs_for, quote_runs
from jobs.models import Job, JobArray, Sweep
from jobs.submission.spec import JobSpec
from sweeps.parameters import Grid, Value, value_text

# What a task's row shows; the parameters come from the sweep's grid, not the row.
TASK_FIELDS = (
    "id",
    "sweep_index",
    "state",
    "state_reason",
    "exit_code",
    "slurm_job_id",
    "array_id",
    "array_task_id",
    "start_time",
    "end_time",
    "elapsed_seconds",
    "gpu_count",
    "metric",
    "error",
    "sweep_current",
)
ACTIVE_STATES = frozenset({"SUBMITTING", "PENDING", "RUNNING", "SUSPENDED", "COMPLETING"})


def own_sweeps(user):
    return Sweep.objects.filter(owner=user)


def current_tasks(sweep: Sweep):
    return Job.objects.filter(sweep=sweep, sweep_current=True).order_by("sweep_index")


def task_rows(sweep: Sweep, *, history: bool = False) -> list[dict]:
    """Every point's current task (with `history`, the earlier attempts too), as dicts with the
    point's values under `parameters`."""
    grid = Grid.from_dict(sweep.grid)
    tasks = Job.objects.filter(sweep=sweep) if history else current_tasks(sweep)
    rows = list(tasks.order_by("sweep_index", "-id").values(*TASK_FIELDS))
    array_ids = dict(JobArray.objects.filter(sweep=sweep).values_list("pk", "slurm_array_job_id"))
    for row in rows:
        row["parameters"] = grid.point(row["sweep_index"])
        row["slurm_array_job_id"] = array_ids.get(row["array_id"])
    return rows


def state_counts(sweep: Sweep) -> dict[str, int]:
    return dict(Counter(current_tasks(sweep).values_list("state", flat=True)))


def compact_states(sweep: Sweep) -> list[list]:
    """[index, job id, state, exit code, metric] per point: the grid's cells, in one query."""
    return [list(row) for row in current_tasks(sweep).values_list("sweep_index", "id", "state", "exit_code", "metric")]


@dataclass(frozen=True)
class SweepCost:
    total: Decimal  # charged tasks, every attempt
    so_far: Decimal  # running tasks' estimates
    charged_tasks: int
    gpu_seconds: int


# Tasks priced per call of the cost provider: its IN lists stay short (SQLite's too).
COST_BATCH = 500


def sweep_cost(sweep: Sweep) -> SweepCost:
    """Every attempt's cost (a rerun does not undo what the first run used); tasks that never
    started cost nothing and are not asked about."""
    tasks = list(Job.objects.filter(sweep=sweep, start_time__isnull=False))
    total, so_far, charged = Decimal(0), Decimal(0), 0
    for start in range(0, len(tasks), COST_BATCH):
        for cost in costs_for(tasks[start : start + COST_BATCH]).values():
            if cost.cost is not None:
                total += cost.cost
                charged += 1
            elif cost.cost_so_far is not None:
                so_far += cost.cost_so_far
    gpu_seconds = sum((task.elapsed_seconds or 0) * (task.gpu_count or 0) for task in tasks)
    return SweepCost(total=total, so_far=so_far, charged_tasks=charged, gpu_seconds=gpu_seconds)


def best_task(sweep: Sweep) -> dict | None:
    if not sweep.metric_name:
        return None
    order = "metric" if sweep.metric_goal == "min" else "-metric"
    row = current_tasks(sweep).filter(metric__isnull=False).order_by(order, "sweep_index").values(*TASK_FIELDS).first()
    if row is None:
        return None
    row["parameters"] = Grid.from_dict(sweep.grid).point(row["sweep_index"])
    return row


def metric_series(sweep: Sweep) -> dict[str, list[tuple[Value, float, int]]]:
    """For each parameter, (value, metric, index) of every task with a metric: the plots' points."""
    grid = Grid.from_dict(sweep.grid)
    measured = current_tasks(sweep).filter(metric__isnull=False).values_list("sweep_index", "metric")
    series: dict[str, list[tuple[Value, float, int]]] = {name: [] for name in grid.names}
    for index, metric in measured:
        for name, value in grid.point(index).items():
            series[name].append((value, metric, index))
    return series


def quote_sweep(user, spec: JobSpec, points: int, group=None) -> RunQuote | None:
    """The most the sweep can cost: every point running its whole time limit, charged to
    `group` (its plan pays when it holds one) or to `user`."""
    return quote_runs(user, spec, runs=points, group=group)


def sort_key(row: dict, key: str):
    if key == "index":
        return (0, row["sweep_index"])
    if key == "state":
        return (0, row["state"], row["sweep_index"])
    value = row["metric"] if key == "metric" else row["parameters"][key]
    if value is None:
        return (1, 0, row["sweep_index"])
    # Numbers before text, each in its order.
    return (0, (0, value, "") if isinstance(value, int | float) else (1, 0, str(value)), row["sweep_index"])


class UnknownSort(ValueError):
    pass


def select_tasks(sweep: Sweep, rows: list[dict], *, state: str = "", sort: str = "index", values=None) -> list[dict]:
    """The task rows in `state` (any when ""), whose parameters have the given `values` (name ->
    value text; "" is any), sorted by `sort`: index, metric, state or a parameter's name, "-"
    first for descending. UnknownSort for any other sort; nothing is filtered then."""
    key = sort.removeprefix("-")
    if key not in ("index", "metric", "state", *sweep.grid["names"]):
        raise UnknownSort(sort)
    if state:
        rows = [row for row in rows if row["state"] == state]
    for name, wanted in (values or {}).items():
        if wanted:
            rows = [row for row in rows if value_text(row["parameters"][name]) == wanted]
    return sorted(rows, key=lambda row: sort_key(row, key), reverse=sort.startswith("-"))
