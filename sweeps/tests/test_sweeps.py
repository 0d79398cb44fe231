"""Sweeps without Slurm: the parameters (grids, ranges, points, refusals), the task table in the
batch script run by bash, Slurm's task id spellings, the array mirror on payloads captured from
both generations (testing/capture_slurm_payloads.py recaptures them), the quota, the API's
refusals and who may see a sweep."""

from __future__ import annotations

import hashlib
import json
import subprocess
import time
from pathlib import Path

import pytest
from django.utils import timezone

from cluster.records.array_ids import bitmap_task_ids, compress_ids, expand_task_string
from cluster.slurmrest.registry import adapter_for
from jobs.mirror.arrays import apply_array_records
from jobs.models import Job, JobArray, Sweep
from jobs.submission.batch_script import render_batch_script
from jobs.submission.quota import active_gpus_by_type
from jobs.submission.spec import GpuRequest, JobSpec, SpecError
from jobs.tests.conftest import GOOD_SPEC
from sweeps import actions
from sweeps.parameters import (
    Grid,
    command_for_tasks,
    command_shown,
    parse_parameter_lines,
    parse_sweep_parameters,
)

PAYLOADS = Path(__file__).resolve().parents[2] / "cluster" / "tests" / "payloads"


def grid(parameters, max_points=10_000, **kwargs) -> Grid:
    return parse_sweep_parameters({"parameters": parameters}, max_points=max_points, **kwargs)


def refusal(data, max_points=10_000, **kwargs) -> dict:
    with pytest.raises(SpecError) as caught:
        parse_sweep_parameters(data, max_points=max_points, **kwargs)
    return caught.value.errors


# --- parameters ------------------------------------------------------------------------------
@pytest.mark.pure
def test_a_grid_is_every_combination_the_first_name_slowest():
    found = grid({"lr": [0.1, 0.3], "bs": [16, 32, 64]})
    assert found.names == ("lr", "bs") and len(found) == 6
    assert found.points[:4] == ((0.1, 16), (0.1, 32), (0.1, 64), (0.3, 16))
    assert found.environment(4) == {"lr": "0.3", "bs": "32"}


@pytest.mark.pure
def test_ranges_include_their_stop_and_do_not_drift():
    assert grid({"x": {"range": [0.1, 0.5, 0.1]}}).points == ((0.1,), (0.2,), (0.3,), (0.4,), (0.5,))
    assert grid({"n": {"range": [16, 64, 16]}}).points == ((16,), (32,), (48,), (64,))
    assert grid({"n": {"range": [1, 10, 4]}}).points == ((1,), (5,), (9,))  # 10 is not on a step
    assert [value for (value,) in grid({"wd": {"log": [1e-5, 1e-2, 4]}}).points] == [1e-05, 0.0001, 0.001, 0.01]
    assert grid({"lr": {"log": ["0.001", "1", "4"]}}).environment(3) == {"lr": "1"}


@pytest.mark.pure
def test_the_forms_lines_read_as_the_api_object():
    text = "lr = 0.0001, 3e-4\n# a comment\nbs = range(16, 48, 16)\nwd = log(1e-5, 1e-3, 3)\nopt = adam, sgd"
    assert parse_parameter_lines(text) == {
        "lr": [0.0001, 0.0003],
        "bs": {"range": ["16", "48", "16"]},
        "wd": {"log": ["1e-5", "1e-3", "3"]},
        "opt": ["adam", "sgd"],
    }
    assert len(grid(parse_parameter_lines(text))) == 2 * 3 * 3 * 2
    with pytest.raises(SpecError) as caught:
        parse_parameter_lines("lr 0.1\nlr = 1\nlr = 2")
    assert caught.value.errors["parameters"] == ["line 1: expected name = values", "line 3: lr is given twice"]


@pytest.mark.pure
def test_explicit_points():
    found = parse_sweep_parameters({"points": [{"lr": 0.1, "bs": 8}, {"bs": 16, "lr": 0.2}]}, max_points=10)
    assert found.names == ("lr", "bs") and found.points == ((0.1, 8), (0.2, 16))
    assert "does not give exactly" in refusal({"points": [{"lr": 1}, {"lr": 2, "bs": 3}]})["points"][0]
    assert "listed twice" in refusal({"points": [{"lr": 1}, {"lr": 1}]})["points"][0]


@pytest.mark.pure
@pytest.mark.parametrize(
    "value",
    ["a b", "$(reboot)", "`id`", "x;y", "it's", 'say "hi"', "a*", "new\nline", "", "x" * 129, None, {"a": 1}],
)
def test_values_that_could_be_read_as_shell_are_refused(value):
    assert "is not a value" in refusal({"parameters": {"opt": [value]}})["parameters"][0]


@pytest.mark.pure
@pytest.mark.parametrize(
    "parameters, words",
    [
        ({"SLURM_ARRAY_TASK_ID": [1]}, "reserved"),
        ({"LD_PRELOAD": [1]}, "reserved"),
        ({"GPUPOOL_SWEEP_INDEX": [1]}, "reserved"),
        ({"1lr": [1]}, "not a parameter name"),
        ({"lr": []}, "at least one value"),
        ({"lr": [1, 1]}, "listed twice"),
        ({"lr": {"range": [5, 1, 1]}}, "start <= stop"),
        ({"lr": {"range": [0, 1, 0]}}, "step above 0"),
        ({"lr": {"log": [0, 1, 3]}}, "0 < start"),
        ({"lr": {"log": [1, 10, 2.5]}}, "whole count"),
        ({"lr": {"range": [0, 1e9, 1]}}, "at most 100"),
        ({"lr": float("nan")}, "give a list"),
        ({"a": list(range(20)), "b": list(range(10))}, "200 points (20 x 10); a sweep has at most 100"),
    ],
)
def test_bad_parameters_are_named(parameters, words):
    assert any(words in message for message in refusal({"parameters": parameters}, max_points=100)["parameters"])


@pytest.mark.pure
def test_a_parameter_may_not_shadow_the_jobs_environment_and_grid_or_points_not_both():
    assert (
        "also set in the job's environment" in refusal({"parameters": {"LR": [1]}}, reserved=("LR",))["parameters"][0]
    )
    assert "not both" in refusal({"parameters": {"a": [1]}, "points": [{"a": 1}]})["parameters"][0]
    assert "give the parameters" in refusal({})["parameters"][0]


@pytest.mark.pure
def test_the_command_template_expands_variables_never_pastes_values():
    command = 'python train.py --lr {lr} --name "{run}" ${lr} {a,b} {other} $\\{lr}'
    assert command_for_tasks(command, ["lr", "run"]) == (
        'python train.py --lr ${lr} --name "${run}" ${lr} {a,b} {other} $\\${lr}'
    )
    assert command_shown("--lr {lr} --bs {bs}", {"lr": 0.0003, "bs": 32}) == "--lr 0.0003 --bs 32"


# --- the batch script's task table, run by bash -------------------------------------------------
def _run_task(tmp_path, script: str, task_id: str) -> subprocess.CompletedProcess:
    (tmp_path / task_id).mkdir(exist_ok=True)
    path = tmp_path / "job.sh"
    path.write_text(script)
    env = {"PATH": "/usr/bin:/bin", "SLURM_ARRAY_TASK_ID": task_id, "SLURM_JOB_ID": "1"}
    return subprocess.run(["bash", str(path)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)


@pytest.mark.pure
def test_each_task_gets_its_values_its_index_and_its_directory(tmp_path):
    points = grid({"lr": [0.1, 0.3], "tag": ["a=b,c", "x/y@z"]})
    spec = JobSpec(
        name="s",
        image="pytorch/pytorch:2.3.0",
        gpu=GpuRequest("a100", count=1),
        command=command_for_tasks('printf "%s|%s|%s|%s\\n" "{lr}" "{tag}" "$GPUPOOL_SWEEP_INDEX" "$PWD"', points.names),
        time_limit_minutes=5,
        data_mount="",
    )
    offset = 1000
    script = render_batch_script(
        spec,
        job_uuid="abc",
        runtime="none",
        array_values={task: points.environment(offset + task - offset) for task in range(4)},
        array_offset=offset,
    )
    done = _run_task(tmp_path, script, "3")
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"0.3|x/y@z|1003|{tmp_path}/3"
    assert "[gpupool]   tag=x/y@z" in done.stdout  # the header names the task's values
    missing = _run_task(tmp_path, script, "7")
    assert missing.returncode == 2 and "no values for array task 7" in missing.stderr


@pytest.mark.pure
def test_slurms_spellings_of_task_ids():
    assert compress_ids([8, 0, 1, 2, 5, 7]) == "0-2,5,7-8"
    assert compress_ids([3]) == "3"
    assert expand_task_string("4-7%2") == ([4, 5, 6, 7], 2)
    assert expand_task_string("1,3,5-9:2") == ([1, 3, 5, 7, 9], 0)
    assert bitmap_task_ids("0x3C") == [2, 3, 4, 5]
    for bad in ("4-", "a", "7-3", "0-99999999"):
        with pytest.raises(ValueError):
            expand_task_string(bad)


# --- the adapters and the mirror on captured payloads ------------------------------------------
def payload(version: str, name: str) -> dict:
    return json.loads((PAYLOADS / version / f"{name}.json").read_text())["body"]


@pytest.mark.pure
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_the_listing_and_the_records_of_an_array(version):
    adapter = adapter_for(version)
    listed = adapter.decode_job_states(payload(version, "array_jobs_state"))
    lines = {(entry.job_id, entry.array_task): entry.state for entry in listed if entry.array_task}
    assert lines[(1, "3")] == lines[(1, "5")] == "PENDING"  # pending tasks under the array's own record
    assert lines[(3, "1")] == "FAILED"  # a task with its own record, under that record's id
    records = adapter.decode_jobs(payload(version, "array_job_pending"))
    pending = next(record for record in records if record.array_task_id is None)
    assert (pending.array_job_id, pending.array_task_string, pending.array_max_tasks) == (1, "3-5%2", 2)
    failed = next(record for record in records if record.array_task_id == 1)
    assert (failed.job_id, failed.state, failed.exit_code) == (3, "FAILED", 3)
    accounting = adapter.decode_accounting(payload(version, "array_accounting"))
    assert {record.array_task_ids for record in accounting} >= {(0,), (1,), (2,), (3,), (4,)}
    assert all(record.array_job_id == 1 for record in accounting)


@pytest.fixture
def provisioned(alice):
    alice.profile.cluster_username = "alice"
    alice.profile.provisioned_at = timezone.now()
    alice.profile.save()
    return alice


def make_sweep(user, points=6, throttle=2, **spec_fields) -> Sweep:
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from plans.catalog import plan_for

    spec = parse_job_spec(
        {**GOOD_SPEC, "gpu_type": "rtx4090", **spec_fields}, plan=plan_for(user), policy=SpecPolicy.from_settings()
    )
    return actions.create_sweep(user, spec, grid({"i": list(range(points))}), name="s", throttle=throttle)


@pytest.mark.django_db
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_the_mirror_writes_every_task_from_the_arrays_records(provisioned, version):
    sweep = make_sweep(provisioned)
    JobArray.objects.filter(sweep=sweep).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=1)
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    array = sweep.arrays.get()
    adapter = adapter_for(version)
    assert apply_array_records(array.pk, adapter.decode_jobs(payload(version, "array_job_pending"))) == 6
    tasks = {task.array_task_id: task for task in Job.objects.filter(array=array)}
    assert (tasks[1].state, tasks[1].exit_code, tasks[1].slurm_job_id) == ("FAILED", 3, 3)
    assert tasks[0].state == tasks[2].state == "RUNNING" and tasks[0].nodes == "gpu-4090-01"
    assert [tasks[i].state for i in (3, 4, 5)] == ["PENDING"] * 3
    assert tasks[3].slurm_job_id is None and tasks[3].state_reason == "JobArrayTaskLimit"
    # The same records again change nothing.
    assert apply_array_records(array.pk, adapter.decode_jobs(payload(version, "array_job_pending"))) == 0

    apply_array_records(array.pk, adapter.decode_jobs(payload(version, "array_job_ended")))
    tasks = {task.array_task_id: task for task in Job.objects.filter(array=array)}
    assert [tasks[i].state for i in range(5)] == ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "COMPLETED"]
    assert tasks[5].state == "CANCELLED"  # 24.11: cancelled running; 26.05: cancelled while it waited
    assert len({task.slurm_job_id for task in tasks.values() if task.slurm_job_id}) == len(
        [task for task in tasks.values() if task.slurm_job_id]
    )


@pytest.mark.django_db
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_a_tasks_start_and_end_are_written_from_its_events_then_its_records_win(provisioned, version):
    """Slurm's hooks name an array task (jobs/slurm_events/receiving.py): its start and end are written
    at once under its own job id, with an empty signature, so the array's next read writes the
    whole record over them. Out of order, a start never undoes an end; another array's task, a
    task under another job id and an array not the portal's are left alone."""
    from jobs.mirror.arrays import apply_task_records, apply_told_tasks

    sweep = make_sweep(provisioned)
    JobArray.objects.filter(sweep=sweep).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=1)
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    array = sweep.arrays.get()
    written = apply_told_tasks(
        {(1, 0): (2, "RUNNING", None), (1, 3): (9, "RUNNING", None), (77, 0): (78, "RUNNING", None)}
    )
    tasks = {task.array_task_id: task for task in Job.objects.filter(array=array)}
    assert sorted(written) == sorted([tasks[0].pk, tasks[3].pk])
    assert (tasks[0].state, tasks[0].slurm_job_id, tasks[0].slurm_states) == ("RUNNING", 2, "")
    assert tasks[0].start_time is not None and tasks[1].state == "PENDING"

    # Task 3 ends; its start told again late (another batch) does not undo the end.
    assert apply_told_tasks({(1, 3): (9, "FAILED", 1764547199)}) == [tasks[3].pk]
    assert apply_told_tasks({(1, 3): (9, "RUNNING", None)}) == []
    task = Job.objects.get(pk=tasks[3].pk)
    assert (task.state, int(task.end_time.timestamp())) == ("FAILED", 1764547199)
    # An end never overwrites another end, nor a task already under another job id.
    assert apply_told_tasks({(1, 3): (9, "COMPLETED", 1764547299)}) == []
    assert apply_told_tasks({(1, 0): (5, "COMPLETED", 1764547299)}) == []
    assert Job.objects.get(pk=tasks[0].pk).state == "RUNNING"

    # A task read by its own id (the event of a start names no task) is written alone.
    adapter = adapter_for(version)
    records = adapter.decode_jobs(payload(version, "array_job_pending"))
    assert apply_task_records([record for record in records if record.array_task_id == 1]) == 1
    assert Job.objects.get(pk=tasks[1].pk).state == "FAILED" and Job.objects.get(pk=tasks[2].pk).state == "PENDING"
    # The array's records then write Slurm's word over what the events said (exit code, nodes).
    apply_array_records(array.pk, records)
    task = Job.objects.get(pk=tasks[0].pk)
    assert task.nodes == "gpu-4090-01" and task.slurm_states != ""

    # Every task told ended, none read yet: the array is still read (exit codes, nodes), and
    # no longer once its records are written.
    from jobs.mirror.arrays import _active_arrays

    ended = adapter.decode_jobs(payload(version, "array_job_ended"))
    own = {record.array_task_id: record for record in ended if record.array_task_id is not None}
    # A task with no record of its own ended with the pending ones (its signature written).
    Job.objects.filter(array=array).exclude(array_task_id__in=own).update(state="CANCELLED", slurm_states="CANCELLED")
    apply_told_tasks({(1, index): (record.job_id, record.state, 1764547399) for index, record in own.items()})
    assert not Job.objects.filter(array=array).exclude(state__in=["COMPLETED", "FAILED", "CANCELLED"]).exists()
    assert Job.objects.filter(array=array, slurm_states="").exists()
    assert list(_active_arrays().values_list("pk", flat=True)) == [array.pk]
    apply_array_records(array.pk, ended)
    assert not Job.objects.filter(array=array, slurm_states="").exists()
    assert not _active_arrays().exists()


@pytest.mark.django_db
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_the_listing_moves_started_and_ended_tasks_before_the_array_is_read(provisioned, version):
    """The state listing names a task with a record of its own by that record's id: its start and
    end are written from the listing line, before the (slow) read of the whole array."""
    from jobs.mirror.arrays import _apply_listing_lines

    sweep = make_sweep(provisioned)
    JobArray.objects.filter(sweep=sweep).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=1)
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    lines = adapter_for(version).decode_job_states(payload(version, "array_jobs_state"))
    assert _apply_listing_lines(1, lines) == 3
    tasks = {task.array_task_id: (task.state, task.slurm_job_id) for task in Job.objects.filter(sweep=sweep)}
    assert tasks == {
        0: ("RUNNING", 2),
        1: ("FAILED", 3),
        2: ("RUNNING", 4),
        3: ("PENDING", None),
        4: ("PENDING", None),
        5: ("PENDING", None),
    }
    assert _apply_listing_lines(1, lines) == 0  # written once


@pytest.mark.django_db
def test_task_events_are_parsed_from_the_batch_and_written_before_the_answer(provisioned, settings):
    from jobs.slurm_events import receiving as slurm_events

    settings.SLURM_EVENTS_SECRET = "test-task-events-secret"
    sweep = make_sweep(provisioned)
    JobArray.objects.filter(sweep=sweep).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=40)
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    # Task 2's end and its start in one batch, the end first: the end is what is written.
    body = (
        b"job=41;state=RUNNING;hook=prolog_slurmd;task=40_0\n"
        b"job=42;state=COMPLETED;hook=jobcomp;ended=1764547199;task=40_1\n"
        b"job=43;state=FAILED;hook=jobcomp;ended=1764547199;task=40_2\n"
        b"job=43;state=RUNNING;hook=prolog_slurmctld;task=40_2\n"
    )
    line = f"n=4;sha256={hashlib.sha256(body).hexdigest()};t={int(time.time())}"
    batch = slurm_events.verify_batch(line, slurm_events.sign(settings.SLURM_EVENTS_SECRET, line))
    assert len(body) <= batch.max_bytes
    events = slurm_events.read_batch(batch, body)
    assert [(e.job_id, e.array_job_id, e.array_task_id) for e in events][:2] == [(41, 40, 0), (42, 40, 1)]
    taken = slurm_events.mark(events)
    states = dict(Job.objects.filter(sweep=sweep).values_list("array_task_id", "state"))
    assert (states[0], states[1], states[2], states[3]) == ("RUNNING", "COMPLETED", "FAILED", "PENDING")
    assert len(taken.written) == 3


@pytest.mark.django_db
def test_a_sweeps_waiting_tasks_do_not_hold_the_plans_gpus(provisioned):
    sweep = make_sweep(provisioned, points=24)
    assert active_gpus_by_type(provisioned) == {}  # 24 waiting tasks hold nothing
    Job.objects.filter(sweep=sweep, sweep_index__in=[0, 1]).update(state="RUNNING")
    assert active_gpus_by_type(provisioned) == {"rtx4090": 2}
    # The plan's two RTX 4090 are held by two running tasks: a third job of the user is refused.
    from jobs.submission.quota import QuotaExceeded, check_quota
    from plans.catalog import plan_for

    with pytest.raises(QuotaExceeded):
        check_quota(provisioned, plan_for(provisioned), "rtx4090", 1)
    with pytest.raises(QuotaExceeded):
        make_sweep(provisioned, points=2)
    assert Sweep.objects.count() == 1


@pytest.mark.django_db
def test_a_sweep_splits_at_max_array_size_with_an_offset(provisioned, settings):
    settings.SLURM_MAX_ARRAY_SIZE = 1001
    sweep = make_sweep(provisioned, points=2500)
    arrays = list(sweep.arrays.order_by("offset"))
    assert [(a.offset, a.task_ids, a.task_count) for a in arrays] == [
        (0, "0-1000", 1001),
        (1001, "0-1000", 1001),
        (2002, "0-497", 498),
    ]
    last = Job.objects.get(sweep=sweep, sweep_index=2499)
    assert (last.array_id, last.array_task_id) == (arrays[2].pk, 497)
    assert last.standard_output.endswith(f"/{arrays[2].uuid}/497/stdout.log")


@pytest.mark.django_db
def test_rerun_takes_ended_tasks_only_and_keeps_the_earlier_attempt(provisioned):
    sweep = make_sweep(provisioned, points=4)
    Job.objects.filter(sweep=sweep).update(state="COMPLETED")
    with pytest.raises(actions.SweepRefused, match="No task of this sweep has failed"):
        actions.rerun_tasks(provisioned, sweep)
    Job.objects.filter(sweep=sweep, sweep_index=2).update(state="FAILED")
    Job.objects.filter(sweep=sweep, sweep_index=3).update(state="RUNNING")
    with pytest.raises(actions.SweepRefused, match="Tasks 3 have not ended"):
        actions.rerun_tasks(provisioned, sweep, [2, 3])
    with pytest.raises(actions.SweepRefused, match="numbered 0 to 3"):
        actions.rerun_tasks(provisioned, sweep, [4])
    assert actions.rerun_tasks(provisioned, sweep) == [2]
    attempts = list(Job.objects.filter(sweep=sweep, sweep_index=2).order_by("pk"))
    assert [(task.state, task.sweep_current) for task in attempts] == [("FAILED", False), ("SUBMITTING", True)]
    rerun = sweep.arrays.order_by("-pk").first()
    assert (rerun.offset, rerun.task_ids) == (0, "2")


@pytest.mark.django_db
def test_the_api_refuses_bad_sweeps_by_field_and_creates_nothing(provisioned, api_client_for):
    api = api_client_for(provisioned)
    base = {**GOOD_SPEC, "gpu_type": "rtx4090"}
    cases = [
        ({**base, "parameters": {"lr": ["a b"]}}, "parameters"),
        ({**base, "parameters": {"lr": [1, 2]}, "throttle": 3}, "throttle"),
        ({**base, "parameters": {"lr": [1]}, "throttle": -1}, "throttle"),
        ({**base, "parameters": {"lr": [1]}, "metric": "a b"}, "metric"),
        ({**base, "parameters": {"lr": [1]}, "spot": True}, "spot"),
        ({**base, "parameters": {"lr": [1]}, "image": "x:latest"}, "image"),
        ({**base}, "parameters"),
    ]
    for body, field in cases:
        answer = api.post("/api/v1/sweeps/", body, format="json")
        assert answer.status_code == 400, (body, answer.content)
        assert field in answer.json()["errors"], (field, answer.json())
    assert Sweep.objects.count() == 0 and Job.objects.count() == 0


@pytest.mark.django_db
def test_another_users_sweep_is_a_404_everywhere(provisioned, bob, api_client_for, client):
    sweep = make_sweep(provisioned, points=2)
    api = api_client_for(bob)
    for method, path in [
        ("get", f"/api/v1/sweeps/{sweep.pk}"),
        ("get", f"/api/v1/sweeps/{sweep.pk}/tasks"),
        ("post", f"/api/v1/sweeps/{sweep.pk}/throttle"),
        ("post", f"/api/v1/sweeps/{sweep.pk}/rerun"),
        ("post", f"/api/v1/sweeps/{sweep.pk}/cancel"),
        ("post", f"/api/v1/sweeps/{sweep.pk}/clone"),
    ]:
        answer = getattr(api, method)(path, {"throttle": 1} if method == "post" else None, format="json")
        assert answer.status_code == 404, (path, answer.status_code)
    assert api.get("/api/v1/sweeps/").json() == []
    client.force_login(bob)
    for path in (f"/jobs/sweeps/{sweep.pk}/", f"/jobs/sweeps/{sweep.pk}/cells.json"):
        assert client.get(path).status_code == 404
    for action in ("throttle", "cancel", "rerun", "clone"):
        assert client.post(f"/jobs/sweeps/{sweep.pk}/{action}", {"throttle": "1"}).status_code == 404
    sweep.refresh_from_db()
    assert sweep.throttle == 2 and Sweep.objects.count() == 1


@pytest.mark.django_db
def test_slurm_down_leaves_the_array_waiting_with_its_reason_and_one_retry(
    provisioned, settings, tmp_path, monkeypatch, client
):
    from datetime import timedelta

    from sweeps.submit import reconcile_arrays, submit_sweep_arrays

    settings.SLURMRESTD_URL = "http://127.0.0.1:9"  # the discard port: nothing listens there
    settings.SLURM_JOB_ROOT_LOCAL = tmp_path
    sweep = make_sweep(provisioned, points=3)
    retries = []
    monkeypatch.setattr("sweeps.submit.submit_sweep_array.apply_async", lambda *a, **k: retries.append(a))
    submit_sweep_arrays.run(sweep.pk)
    array = sweep.arrays.get()
    assert array.state == JobArray.State.SUBMITTING and "(attempt 1)" in array.error, array.error
    assert array.submit_claimed_until > timezone.now()  # held by its one retry
    assert retries == [((array.pk,),)]
    JobArray.objects.filter(pk=array.pk).update(created_at=timezone.now() - timedelta(minutes=1))
    assert reconcile_arrays.run() == 0  # nobody sends a second while the retry holds it
    assert set(Job.objects.filter(sweep=sweep).values_list("state", flat=True)) == {"SUBMITTING"}
    client.force_login(provisioned)
    assert "(attempt 1)" in client.get(f"/jobs/sweeps/{sweep.pk}/").content.decode()
    # Its retry lost (a worker killed): once the claim runs out, the reconciler sends it again.
    JobArray.objects.filter(pk=array.pk).update(submit_claimed_until=timezone.now() - timedelta(seconds=1))
    sent = []
    monkeypatch.setattr("sweeps.submit.submit_sweep_array.delay", sent.append)
    assert reconcile_arrays.run() == 1 and sent == [array.pk]


@pytest.mark.django_db
@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_an_array_gone_from_slurmctld_is_finished_from_slurmdbd_and_not_asked_every_pass(provisioned, version):
    from jobs.mirror.arrays import mirror_arrays

    sweep = make_sweep(provisioned)
    JobArray.objects.filter(sweep=sweep).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=1)
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    adapter = adapter_for(version)

    class Slurmdbd:
        asked = 0

        def get_array_accounting(self, array_job_id):
            self.asked += 1
            return [] if self.asked == 1 else adapter.decode_accounting(payload(version, "array_accounting"))

    slurmdbd = Slurmdbd()
    mirror_arrays(slurmdbd, [])  # not in slurmdbd yet: nothing changes
    mirror_arrays(slurmdbd, [])  # asked again only after GONE_RETRY_SECONDS
    assert slurmdbd.asked == 1 and not Job.objects.filter(sweep=sweep).exclude(state="PENDING").exists()
    JobArray.objects.filter(sweep=sweep).update(listing_signature="gone 1")  # long ago
    assert mirror_arrays(slurmdbd, []) == 6 and slurmdbd.asked == 2
    states = dict(Job.objects.filter(sweep=sweep).values_list("array_task_id", "state"))
    assert states[1] == "FAILED" and states[5] == "CANCELLED" and states[0] == "COMPLETED"
    assert mirror_arrays(slurmdbd, []) == 0 and slurmdbd.asked == 2  # every task ended: nothing to ask


@pytest.mark.django_db
def test_waiting_sweep_tasks_are_bounded_by_the_plans_size(provisioned, settings, api_client_for):
    """Five sweeps of 10,000 a minute were each a line in every mirror pass."""
    from jobs.submission.quota import QuotaExceeded

    settings.SWEEP_WAITING_TASKS_PER_GPU = 2  # Pro holds 4 GPUs at once: 8 tasks may wait
    first = make_sweep(provisioned, points=6)
    with pytest.raises(QuotaExceeded, match="may have 8 sweep tasks waiting at once; 6 wait now and this adds 6"):
        make_sweep(provisioned, points=6)
    body = {**GOOD_SPEC, "gpu_type": "rtx4090", "parameters": {"lr": [1, 2, 3]}}
    refused = api_client_for(provisioned).post("/api/v1/sweeps/", body, format="json")
    assert refused.status_code == 403 and "sweep tasks waiting" in refused.json()["detail"]
    Job.objects.filter(sweep=first).update(state="COMPLETED")  # ran: no longer waiting
    assert make_sweep(provisioned, points=6).point_count == 6


class _ScontrolAnswers:
    """scontrol's answers to `update ArrayTaskThrottle`, as the real daemons gave them."""

    def __init__(self, refusals: dict[int, str]):
        self.refusals = refusals
        self.asked: list[tuple[int, int]] = []

    def set_array_throttle(self, array_job_id, throttle):
        from cluster.errors import SlurmCommandError, words_for_slurm_output

        self.asked.append((array_job_id, throttle))
        if array_job_id in self.refusals:
            output = self.refusals[array_job_id]
            raise SlurmCommandError(
                f"scontrol update JobId={array_job_id} ArrayTaskThrottle={throttle} failed (1): {output}",
                public_message=words_for_slurm_output(output),
            )


def _two_live_arrays(user) -> Sweep:
    sweep = make_sweep(user, points=6, throttle=2)
    array = sweep.arrays.get()
    JobArray.objects.filter(pk=array.pk).update(state=JobArray.State.SUBMITTED, slurm_array_job_id=2710)
    second = JobArray.objects.create(
        sweep=sweep, offset=3, task_ids="0-2", task_count=3, state=JobArray.State.SUBMITTED, slurm_array_job_id=2711
    )
    Job.objects.filter(sweep=sweep).update(state="PENDING")
    Job.objects.filter(sweep=sweep, sweep_index__gte=3).update(array=second)
    return sweep


@pytest.mark.django_db
def test_an_array_that_ended_while_the_mirror_lagged_does_not_refuse_the_throttle(provisioned, monkeypatch):
    sweep = _two_live_arrays(provisioned)
    # The mirror still shows array 2710's tasks pending; Slurm has seen them all end.
    answers = _ScontrolAnswers({2710: "2710_0-3: Job has already finished"})
    monkeypatch.setattr(actions, "slurm_cli", lambda: answers)
    actions.set_throttle(provisioned, sweep, 4)
    assert sorted(answers.asked) == [(2710, 4), (2711, 4)]
    sweep.refresh_from_db()
    assert sweep.throttle == 4


@pytest.mark.django_db
def test_a_throttle_slurm_refuses_is_said_in_words_without_the_command_line(provisioned, monkeypatch):
    sweep = _two_live_arrays(provisioned)
    answers = _ScontrolAnswers({2711: "slurm_update error: Access/permission denied"})
    monkeypatch.setattr(actions, "slurm_cli", lambda: answers)
    with pytest.raises(actions.SweepRefused) as refused:
        actions.set_throttle(provisioned, sweep, 4)
    said = str(refused.value)
    assert "try again" in said and "not allowed" in said
    assert "scontrol" not in said and "ArrayTaskThrottle" not in said and "2711" not in said
