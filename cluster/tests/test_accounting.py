"""GPU-second arithmetic over accounting records (cluster/records/accounting.py): the captured
slurmdbd record and small literal ones, no Slurm and no database."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from cluster.records import accounting
from cluster.records.types import AccountingRecord
from cluster.slurmrest.v0041 import V0041Adapter

PAYLOADS = Path(__file__).parent / "payloads" / "v0.0.41"
T0 = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)
UNSET = datetime.fromtimestamp(4294967294, tz=UTC)  # slurmdbd's start of a job that never started


def run(
    job_id=1,
    *,
    start=T0,
    end=T0 + timedelta(hours=1),
    tres=None,
    user="alice",
    nodes="gpu-a100-01",
    state="COMPLETED",
):
    tres = {"cpu": 1, "gres/gpu": 2, "gres/gpu:a100": 2} if tres is None else tres
    elapsed = int((end - start).total_seconds()) if start and end and end >= start else 0
    return AccountingRecord(
        job_id=job_id,
        user_name=user,
        account="portal",
        qos="pro",
        states=(state,),
        submit_time=start,
        start_time=start,
        end_time=end,
        elapsed_seconds=elapsed,
        allocated_tres=tres,
        nodes=nodes,
        exit_code=0,
    )


def captured_record() -> AccountingRecord:
    body = json.loads((PAYLOADS / "accounting_completed.json").read_text())["body"]
    (record,) = V0041Adapter().decode_accounting(body)
    return record


def test_the_captured_run_used_its_elapsed_seconds_on_one_a100():
    record = captured_record()
    window = (record.start_time - timedelta(hours=1), record.end_time + timedelta(hours=1))
    used = accounting.usage([record], *window, now=record.end_time + timedelta(days=1))
    assert record.is_settled
    assert used.gpu_seconds == {"a100": record.elapsed_seconds}
    assert used.total_gpu_seconds == record.gpu_seconds > 0
    assert used.shard_gb_seconds == {}


def test_a_run_is_clipped_to_the_window():
    record = run(start=T0, end=T0 + timedelta(hours=2))
    used = accounting.usage([record], T0 + timedelta(hours=1), T0 + timedelta(hours=5), now=T0 + timedelta(days=1))
    assert used.gpu_seconds == {"a100": 2 * 3600}
    before = accounting.usage([record], T0 - timedelta(hours=3), T0, now=T0 + timedelta(days=1))
    assert before.gpu_seconds == {}


def test_adjacent_windows_add_up_to_the_whole_run_even_with_fractional_bounds():
    record = run(start=T0, end=T0 + timedelta(seconds=7201))
    cut = T0 + timedelta(seconds=1000, microseconds=700_000)
    later = T0 + timedelta(days=1)
    first = accounting.usage([record], T0 - timedelta(hours=1), cut, now=later)
    second = accounting.usage([record], cut, later, now=later)
    assert first.total_gpu_seconds + second.total_gpu_seconds == 2 * 7201
    assert first.total_gpu_seconds == 2 * 1000  # whole seconds, rounded down at the cut
    assert all(type(value) is int for value in (*first.gpu_seconds.values(), *second.gpu_seconds.values()))


def test_a_running_job_counts_up_to_now_and_nothing_after_it():
    now = T0 + timedelta(minutes=30)
    running = run(start=T0, end=None, state="RUNNING")
    used = accounting.usage([running], T0 - timedelta(hours=1), T0 + timedelta(hours=3), now=now)
    assert used.gpu_seconds == {"a100": 2 * 1800}
    # A clock ahead: slurmdbd says it started after `now`.
    ahead = run(start=now + timedelta(minutes=5), end=None, state="RUNNING")
    assert accounting.usage([ahead], T0, T0 + timedelta(hours=3), now=now).gpu_seconds == {}


def test_runs_that_never_started_used_nothing_whatever_their_tres_says():
    # A requeued run cancelled while pending keeps the GPUs it asked for in its TRES (seen on 24.11).
    never = run(start=UNSET, end=T0, nodes="None assigned", state="CANCELLED")
    pending = run(start=None, end=None, nodes="", state="PENDING")
    used = accounting.usage([never, pending], T0 - timedelta(days=1), T0 + timedelta(days=1), now=T0)
    assert used == accounting.Usage()


def test_gpus_slurm_recorded_without_a_type_are_under_the_empty_type():
    record = run(tres={"gres/gpu": 3, "gres/gpu:h100": 1})
    assert accounting.gpus_by_type(record) == {"h100": 1, "": 2}
    used = accounting.usage([record], T0, T0 + timedelta(hours=1), now=T0 + timedelta(days=1))
    assert used.gpu_seconds == {"": 2 * 3600, "h100": 3600}


def test_shard_runs_are_gpu_memory_gb_seconds_typed_by_their_node():
    # How 24.11 records a shard job: `gres/shard=3`, no type.
    shard_run = run(tres={"cpu": 1, "gres/shard": 3}, end=T0 + timedelta(seconds=10))
    window = (T0, T0 + timedelta(hours=1))
    later = T0 + timedelta(days=1)
    typed = accounting.usage([shard_run], *window, now=later, gb_per_shard=4, node_types={"gpu-a100-01": "a100"})
    assert typed.gpu_seconds == {}
    assert typed.shard_gb_seconds == {"a100": 3 * 4 * 10}
    unknown_node = accounting.usage([shard_run], *window, now=later, gb_per_shard=4)
    assert unknown_node.shard_gb_seconds == {"": 120}
    # Without a size per shard, shards are not metered at all.
    assert accounting.usage([shard_run], *window, now=later).shard_gb_seconds == {}
    by_type = accounting.usage(
        [shard_run], *window, now=later, gb_per_shard={"h100": 4}, node_types={"gpu-a100-01": "a100"}
    )
    assert by_type.shard_gb_seconds == {}


def test_a_typed_shard_entry_wins_and_mixed_node_types_are_unknown():
    typed = run(tres={"gres/shard": 2, "gres/shard:h100": 2}, nodes="gpu-h100-01")
    assert accounting.shards_by_type(typed) == {"h100": 2}
    spread = run(tres={"gres/shard": 4}, nodes="gpu-a100-01,gpu-h100-01")
    types = {"gpu-a100-01": "a100", "gpu-h100-01": "h100", "gpu-a100-02": "a100"}
    assert accounting.shards_by_type(spread, types) == {"": 4}
    both_a100 = run(tres={"gres/shard": 4}, nodes="gpu-a100-[01-02]")
    assert accounting.shards_by_type(both_a100, types) == {"a100": 4}


def test_usage_by_user_adds_each_users_runs_and_leaves_out_who_used_nothing():
    later = T0 + timedelta(days=1)
    records = [
        run(1, user="alice"),
        run(
            2,
            user="alice",
            start=T0 + timedelta(hours=2),
            end=T0 + timedelta(hours=3),
            tres={"gres/gpu": 1, "gres/gpu:h100": 1},
        ),
        run(3, user="bob", tres={"gres/shard": 5}),
        run(4, user="carol", start=UNSET, end=T0, nodes="None assigned", state="CANCELLED"),
    ]
    by_user = accounting.usage_by_user(
        records, T0, later, now=later, gb_per_shard=4, node_types={"gpu-a100-01": "a100"}
    )
    assert list(by_user) == ["alice", "bob"]
    assert by_user["alice"].gpu_seconds == {"a100": 7200, "h100": 3600}
    assert by_user["bob"].shard_gb_seconds == {"a100": 5 * 4 * 3600} and by_user["bob"].gpu_seconds == {}
    assert accounting.gpu_seconds_by_type(records, T0, later, now=later) == {"a100": 7200, "h100": 3600}


def test_gpus_held_at_a_moment_are_runs_started_and_not_ended():
    moment = T0 + timedelta(minutes=30)
    records = [
        run(1),  # 10:00-11:00, 2 a100
        run(2, start=T0 - timedelta(hours=2), end=T0, tres={"gres/gpu": 1, "gres/gpu:h100": 1}),  # ended
        run(3, start=T0, end=None, state="RUNNING", tres={"gres/gpu": 1}),
    ]
    assert accounting.gpus_allocated_at(records, moment) == {"": 1, "a100": 2}


def test_window_lengths_are_real_seconds_across_a_dst_change():
    berlin = ZoneInfo("Europe/Berlin")
    assert (
        accounting.seconds_between(datetime(2026, 3, 29, tzinfo=berlin), datetime(2026, 3, 30, tzinfo=berlin))
        == 23 * 3600
    )


def test_times_without_a_zone_are_refused():
    with pytest.raises(ValueError, match="zone"):
        accounting.usage([run()], datetime(2026, 11, 2), datetime(2026, 11, 3), now=T0 + timedelta(days=2))


def test_only_settled_records_are_for_metering():
    whole = run(1)
    end_before_start = run(2, tres={})  # slurmdbd has the end but not yet the allocation
    running = run(3, end=None, state="RUNNING")
    assert accounting.settled([whole, end_before_start, running]) == [whole]


SAMPLED = sorted((Path(__file__).parent / "payloads").glob("v*/accounting_sampled.json"))


@pytest.mark.pure
@pytest.mark.parametrize("path", SAMPLED, ids=lambda path: path.parent.name)
def test_a_sampled_runs_cpu_time_and_memory_peak_come_from_its_steps(path):
    """A job that spun a CPU for 38 s and held 200 MB past the gather interval, as slurmdbd recorded it
    (`python -m testing.capture_accounting_payloads`): the job's own time.total is 0, its steps' is not."""
    from cluster.slurmrest.registry import adapter_for

    (record,) = adapter_for(path.parent.name).decode_accounting(json.loads(path.read_text())["body"])
    assert 30 <= record.cpu_seconds <= record.elapsed_seconds + 5
    assert 200 * 2**20 <= record.max_rss_bytes < 1024 * 2**20
    assert record.allocated_tres["cpu"] >= 1
    # A run shorter than the gather interval has CPU time but no memory sample: None, never 0.
    (short,) = V0041Adapter().decode_accounting(
        json.loads((PAYLOADS / "accounting_completed.json").read_text())["body"]
    )
    assert short.max_rss_bytes is None and short.cpu_seconds is not None
