"""When an accounting record may be copied: slurmdbd can record a run's end before its start."""

from datetime import UTC, datetime, timedelta

from cluster.records.types import AccountingRecord

START = datetime(2026, 11, 30, 16, 20, 11, tzinfo=UTC)
TRES = {"cpu": 1, "gres/gpu": 1, "gres/gpu:rtx4090": 1}


def _record(state="COMPLETED", start=START, end=START + timedelta(seconds=8), elapsed=8, tres=None):
    return AccountingRecord(
        job_id=25,
        user_name="u",
        account="portal",
        qos="pro",
        states=(state,),
        submit_time=START,
        start_time=start,
        end_time=end,
        elapsed_seconds=elapsed,
        allocated_tres=TRES if tres is None else tres,
        nodes="gpu-4090-01",
        exit_code=0,
    )


def test_a_whole_run_is_settled():
    assert _record().is_settled


def test_an_end_without_its_start_is_not():
    # As seen on 24.11 a few seconds after an 8 s job ended.
    assert not _record(elapsed=0, tres={}).is_settled
    assert not _record(elapsed=0).is_settled


def test_a_running_job_is_not():
    assert not _record(state="RUNNING", end=None).is_settled


def test_a_job_cancelled_while_pending_is_settled_with_nothing_used():
    record = _record(state="CANCELLED", start=None, elapsed=0, tres={})
    assert record.is_settled and record.gpu_seconds == 0
