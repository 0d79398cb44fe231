"""Sweeps on the real dev cluster (both generations): a 2 x 3 grid with throttle 2, split in two
arrays by a MaxArraySize of 4 (offset 4, the second after the first), every task printing its
values, never more than 2 running, one failing and rerun as a new array, the throttle raised
live, each task's GPU-seconds from slurmdbd adding up to the sweep's, the metric read."""

from __future__ import annotations

import re
import time

import pytest

from billing.models import UsageRecord
from billing.usage.metering import run_metering
from billing.views import sweeps_on_invoice
from cluster.clusters.services import rest_client, slurm_cli
from conftest import subscribe
from jobs.logs import local_log_path, read_tail
from jobs.mirror.arrays import record_array_accounting
from jobs.models import FINAL_STATES, UNREAD_OR_UNFINISHED, Job, JobArray, Sweep
from jobs.tasks import run_sync
from sweeps import queries
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

# The point a=2, b=y fails in the sweep's own array (2 tasks), not in its rerun (1 task).
COMMAND = (
    'echo "values a={a} b={b} index $GPUPOOL_SWEEP_INDEX"; '
    'if [ "$a" = 2 ] && [ "$b" = y ] && [ "$SLURM_ARRAY_TASK_COUNT" = 2 ]; then exit 3; fi; '
    'echo "GPUPOOL_METRIC loss=$a.$GPUPOOL_SWEEP_INDEX"; sleep 3'
)
SWEEP = {
    "name": "grid",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "command": COMMAND,
    "time_limit_minutes": 3,
    "parameters": {"a": [1, 2], "b": ["x", "y", "z"]},
    "throttle": 2,
    "metric": "loss",
}


def _running_in_slurm(sweep: Sweep) -> int:
    array_ids = set(sweep.arrays.exclude(slurm_array_job_id=None).values_list("slurm_array_job_id", flat=True))
    records = [record for array_id in array_ids for record in rest_client().get_array_jobs(array_id)]
    return sum(1 for record in records if record.state == "RUNNING")


def _mirror_until_done(sweep: Sweep, most_running: list[int], timeout: float = 240) -> None:
    def done():
        run_sync()
        most_running.append(_running_in_slurm(sweep))
        # Ended and read: a task told ended by the listing gets its exit code from the array's read.
        return not queries.current_tasks(sweep).filter(UNREAD_OR_UNFINISHED).exists()

    wait_for(done, timeout=timeout, interval=0.5, what="every task of the sweep to end")


def test_a_grid_with_a_throttle_split_rerun_and_costed(
    alice, provision, slurm, api_client_for, client, settings, eager_tasks
):
    settings.SLURM_MAX_ARRAY_SIZE = 4
    subscribe(alice, "pro")  # 2 RTX 4090 at once
    provision(alice)
    api = api_client_for(alice)
    answer = api.post("/api/v1/sweeps/", SWEEP, format="json")
    assert answer.status_code == 201, answer.content
    body = answer.json()
    sweep = Sweep.objects.get(pk=body["id"])
    assert body["point_count"] == 6 and body["quote"]["tasks"] == 6
    assert body["quote"]["gpu_seconds"] == 6 * 3 * 60

    arrays = list(sweep.arrays.order_by("offset"))
    assert [(array.offset, array.task_ids, array.state) for array in arrays] == [
        (0, "0-3", JobArray.State.SUBMITTED),
        (4, "0-1", JobArray.State.SUBMITTED),
    ], [array.error_detail for array in arrays]
    first, second = (array.slurm_array_job_id for array in arrays)
    shown = slurm_cli().run("scontrol", "show", "job", str(first)).stdout
    assert "ArrayTaskThrottle=2" in shown
    later = slurm_cli().run("scontrol", "show", "job", str(second)).stdout
    assert f"Dependency=afterany:{first}" in later or "Dependency=(null)" in later  # met once the first ended

    most_running: list[int] = []
    _mirror_until_done(sweep, most_running)
    assert max(most_running) <= 2, most_running
    assert max(most_running) >= 1

    tasks = {task.sweep_index: task for task in queries.current_tasks(sweep)}
    assert sorted(tasks) == list(range(6))
    failed = [index for index, task in tasks.items() if task.state == "FAILED"]
    assert failed == [4] and tasks[4].exit_code == 3  # a=2, b=y: the grid's 5th point
    for index, task in tasks.items():
        values = {"a": [1, 2][index // 3], "b": ["x", "y", "z"][index % 3]}
        output = read_tail(local_log_path(task.standard_output, task.cluster_user), 4096).text
        assert f"values a={values['a']} b={values['b']} index {index}" in output, output
        assert (task.array.offset, task.array_task_id) == ((0, index) if index < 4 else (4, index - 4))

    # Rerun the failed point: a new array with the same values; it passes this time.
    answer = api.post(f"/api/v1/sweeps/{sweep.pk}/rerun", {}, format="json")
    assert answer.status_code == 200, answer.content
    rerun = sweep.arrays.order_by("-pk").first()
    assert (rerun.offset, rerun.task_ids, rerun.state) == (4, "0", JobArray.State.SUBMITTED)
    assert Job.objects.filter(sweep=sweep, sweep_index=4).count() == 2
    # The throttle changed live on the new array.
    answer = api.post(f"/api/v1/sweeps/{sweep.pk}/throttle", {"throttle": 3}, format="json")
    assert answer.status_code == 200, answer.content
    if not queries.current_tasks(sweep).filter(sweep_index=4, state__in=FINAL_STATES).exists():
        shown = slurm_cli().run("scontrol", "show", "job", str(rerun.slurm_array_job_id)).stdout
        assert re.search(r"ArrayTaskThrottle=3\b", shown) or "JobState=COMPLETED" in shown, shown
    _mirror_until_done(sweep, [])
    again = queries.current_tasks(sweep).get(sweep_index=4)
    assert again.state == "COMPLETED" and again.exit_code == 0

    # slurmdbd's figures for every attempt: the sweep's GPU-seconds are the tasks' sum.
    def accounted():
        run_sync()
        record_array_accounting(rest_client())
        return not Job.objects.filter(sweep=sweep, elapsed_seconds__isnull=True).exists()

    wait_for(accounted, timeout=90, interval=1, what="slurmdbd's records of every task")
    attempts = list(Job.objects.filter(sweep=sweep))
    assert len(attempts) == 7 and all(task.gpu_count == 1 for task in attempts if task.elapsed_seconds)
    assert sum(task.elapsed_seconds for task in attempts) >= 5 * 3
    cost = queries.sweep_cost(sweep)
    assert cost.gpu_seconds == sum(task.elapsed_seconds * task.gpu_count for task in attempts)

    # Metered and charged like any job: the sweep's total is its tasks' charges.
    run_metering()
    body = api.get(f"/api/v1/sweeps/{sweep.pk}").json()
    charged = [api.get(f"/api/v1/jobs/{task.pk}").json()["cost"] for task in attempts]
    assert all(amount is not None for amount in charged), charged
    from decimal import Decimal

    assert Decimal(body["cost"]) == sum(Decimal(amount) for amount in charged)
    # ... and the invoice says what the sweep made up of it: every attempt's run.
    records = UsageRecord.objects.filter(job__sweep=sweep)
    assert records.count() == 7
    [on_invoice] = sweeps_on_invoice(records.first().invoice)
    assert (on_invoice["job__sweep"], on_invoice["runs"]) == (sweep.pk, 7)
    assert on_invoice["amount"] == sum(record.amount for record in records)
    client.force_login(alice)
    page = client.get(f"/billing/invoices/{records.first().invoice_id}/")
    assert page.status_code == 200 and b"data-invoice-sweeps" in page.content

    # Each completed task reported its metric; the best (lowest loss) is point 0.
    time.sleep(0.5)
    tasks = api.get(f"/api/v1/sweeps/{sweep.pk}/tasks?sort=metric").json()
    assert [task["metric"] is not None for task in tasks] == [True] * 6, tasks
    assert body["best"]["sweep_index"] == 0 and body["best"]["parameters"] == {"a": 1, "b": "x"}
