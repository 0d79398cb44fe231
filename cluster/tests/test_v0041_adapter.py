"""The v0.0.41 adapter on payloads captured from the real slurmrestd 24.11.

Recapture with `python -m testing.capture_slurm_payloads` (dev cluster running).
"""

import json
from datetime import datetime
from pathlib import Path

import pytest

from cluster.errors import SlurmAuthError, SlurmNotFound, SlurmRequestError, SlurmTransientError
from cluster.records.types import JobSubmission
from cluster.slurmrest.client import _raise_for_response
from cluster.slurmrest.v0041 import V0041Adapter

PAYLOADS = Path(__file__).parent / "payloads" / "v0.0.41"
adapter = V0041Adapter()


def captured(name: str) -> tuple[int, dict]:
    data = json.loads((PAYLOADS / f"{name}.json").read_text())
    return data["status"], data["body"]


def test_job_states_listing():
    _, body = captured("jobs_state")
    entries = adapter.decode_job_states(body)
    assert entries, "the capture holds at least the captured jobs"
    assert all(isinstance(entry.job_id, int) for entry in entries)
    assert {"RUNNING"} <= {entry.state for entry in entries}


def test_running_gpu_job():
    _, body = captured("job_running")
    (job,) = adapter.decode_jobs(body)
    assert job.state == "RUNNING"
    assert job.tres_per_node == "gres/gpu:a100:1"
    assert "gres/gpu=1" in job.allocated_tres
    assert job.nodes.startswith("gpu-a100-")
    assert job.time_limit_minutes == 5
    assert isinstance(job.start_time, datetime) and job.start_time.tzinfo is not None
    assert job.end_time is not None  # Slurm's expected end while running
    assert job.user_name == "ptcapture"
    assert job.standard_output.endswith("/stdout.log")
    assert job.gpu_allocation == {job.nodes: (0,)}


def test_completed_job_has_exit_code_and_end():
    _, body = captured("job_completed")
    (job,) = adapter.decode_jobs(body)
    assert job.state == "COMPLETED" and job.is_terminal
    assert job.exit_code == 0
    assert job.exit_signal is None  # unset in the payload
    assert job.end_time >= job.start_time


def test_nodes_with_gpus_in_use_and_shards():
    _, body = captured("nodes_busy")
    nodes = {node.name: node for node in adapter.decode_nodes(body)}
    assert set(nodes) == {"gpu-4090-01", "gpu-4090-02", "gpu-a100-01", "gpu-a100-02", "gpu-h100-01"}
    a100 = nodes["gpu-a100-01"]
    assert a100.state == "MIXED"
    assert a100.gpus[0].gpu_type == "a100" and a100.gpus[0].count == 4
    assert a100.gpus[0].used_indexes == (0,)
    assert (a100.shards_total, a100.shards_used) == (40, 3)
    assert a100.features == ("gpu_type:a100",)
    assert nodes["gpu-h100-01"].gpu_count == 2
    assert nodes["gpu-4090-02"].gpus[0].used == 0


def test_partition():
    _, body = captured("partitions")
    (partition,) = adapter.decode_partitions(body)
    assert partition.name == "gpu" and partition.state == "UP"
    assert partition.max_time_minutes == 7 * 24 * 60
    assert partition.default_time_minutes == 60


def test_gpu_reservation():
    _, body = captured("reservations")
    (reservation,) = adapter.decode_reservations(body)
    assert reservation.name == "capture_resv"
    assert reservation.users == ("ptcapture",)
    assert "gres/gpu:a100=2" in reservation.tres
    assert (reservation.end_time - reservation.start_time).total_seconds() == 120 * 60


def test_accounting_record_gives_gpu_seconds():
    _, body = captured("accounting_completed")
    (record,) = adapter.decode_accounting(body)
    assert record.state == "COMPLETED"
    assert record.gpu_count == 1
    assert record.allocated_tres["gres/gpu:a100"] == 1
    assert record.elapsed_seconds >= 20
    assert record.gpu_seconds == record.elapsed_seconds


def test_submitted_job_id():
    _, body = captured("submit_ok")
    assert adapter.decode_submitted_job_id(body) == body["result"]["job_id"]


def test_submission_encoding_uses_v0041_shapes():
    encoded = adapter.encode_submission(
        JobSubmission(
            name="n",
            script="#!/bin/bash\ntrue\n",
            working_directory="/srv/gpupool/jobs/x",
            standard_output="/srv/gpupool/jobs/x/out",
            standard_error="/srv/gpupool/jobs/x/err",
            environment={"A": "1"},
            time_limit_minutes=30,
            tres_per_node="gres/gpu:a100:2",
            comment="uuid",
        )
    )["job"]
    assert encoded["environment"] == ["A=1"]
    assert encoded["time_limit"] == {"set": True, "infinite": False, "number": 30}
    assert encoded["tres_per_node"] == "gres/gpu:a100:2"
    assert "gres" not in encoded  # ignored by v0.0.41: the job would run without a GPU
    assert "qos" not in encoded  # empty optional fields are left out


@pytest.mark.parametrize(
    "name, error_class",
    [
        ("bad_token_jobs", SlurmAuthError),
        ("bad_token_nodes", SlurmAuthError),
        ("job_missing", SlurmNotFound),
        ("submit_too_many_gpus", SlurmRequestError),
    ],
)
def test_error_responses_are_classified(name, error_class):
    status, body = captured(name)
    with pytest.raises(error_class) as caught:
        _raise_for_response(status, body, name, "")
    assert not caught.value.transient
    assert caught.value.error_number == body["errors"][0]["error_number"]


def test_a_refused_cancel_answers_200_with_the_refusal_inside():
    status, body = captured("cancel_refused")
    assert status == 200 and body["errors"] == []
    assert body["status"][0]["error"]["code"] == 2002


def test_daemon_failures_without_a_slurm_error_are_transient():
    with pytest.raises(SlurmTransientError):
        _raise_for_response(502, None, "GET /x", "Bad Gateway")
    with pytest.raises(SlurmTransientError):
        _raise_for_response(
            500, {"errors": [{"error_number": 1001, "description": "Unable to contact slurm controller"}]}, "GET", ""
        )
