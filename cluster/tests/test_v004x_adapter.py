"""Every adapter on payloads captured from its own daemon: v0.0.41 from Slurm 24.11, v0.0.42
and v0.0.45 from Slurm 26.05 (v0.0.42 has the same fields on both). What the portal reads must
come out the same whatever the version; the differences are tested by name below.

Recapture: `python -m testing.capture_slurm_payloads --release 26.05 --api-version all`.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import SlurmAuthError, SlurmNotFound, SlurmRequestError
from cluster.slurmrest.base import ServedApi, parse_openapi
from cluster.slurmrest.client import _raise_for_response
from cluster.slurmrest.registry import AUTO, SlurmApiVersionError, adapter_for, choose_version

PAYLOADS = Path(__file__).parent / "payloads"
VERSIONS = ["v0.0.41", "v0.0.42", "v0.0.45"]


def captured(version: str, name: str) -> tuple[int, dict]:
    data = json.loads((PAYLOADS / version / f"{name}.json").read_text())
    return data["status"], data["body"]


def openapi(release: str) -> dict:
    return json.loads((PAYLOADS / f"openapi-{release}.json").read_text())


@pytest.fixture(params=VERSIONS)
def version(request):
    return request.param


# --- the same typed results from every version ------------------------------------------------
def test_running_gpu_job(version):
    _, body = captured(version, "job_running")
    (job,) = adapter_for(version).decode_jobs(body)
    assert job.state == "RUNNING"
    assert job.tres_per_node == "gres/gpu:a100:1"
    assert "gres/gpu=1" in job.allocated_tres
    assert job.nodes.startswith("gpu-a100-")
    assert job.time_limit_minutes == 5
    assert job.start_time.tzinfo is not None and job.end_time > job.start_time
    assert job.user_name == "ptcapture"
    assert job.standard_output.endswith("/stdout.log")
    assert job.gpu_allocation == {job.nodes: (0,)}


def test_job_states_listing(version):
    _, body = captured(version, "jobs_state")
    entries = adapter_for(version).decode_job_states(body)
    assert entries and all(isinstance(entry.job_id, int) for entry in entries)
    assert "RUNNING" in {entry.state for entry in entries}


def test_completed_job(version):
    _, body = captured(version, "job_completed")
    (job,) = adapter_for(version).decode_jobs(body)
    assert job.state == "COMPLETED" and job.is_terminal
    assert (job.exit_code, job.exit_signal) == (0, None)
    assert job.end_time >= job.start_time


def test_nodes_with_a_gpu_and_shards_in_use(version):
    _, body = captured(version, "nodes_busy")
    nodes = {node.name: node for node in adapter_for(version).decode_nodes(body)}
    assert set(nodes) == {"gpu-4090-01", "gpu-4090-02", "gpu-a100-01", "gpu-a100-02", "gpu-h100-01"}
    a100 = [node for name, node in nodes.items() if name.startswith("gpu-a100")]
    assert sum(node.gpus[0].used for node in a100) == 1
    assert sum(node.shards_used for node in a100) == 3
    assert {node.shards_total for node in a100} == {40}
    assert nodes["gpu-h100-01"].gpu_count == 2 and nodes["gpu-h100-01"].gpus[0].gpu_type == "h100"
    assert nodes["gpu-4090-01"].features == ("gpu_type:rtx4090",)


def test_partition(version):
    _, body = captured(version, "partitions")
    (partition,) = adapter_for(version).decode_partitions(body)
    assert (partition.name, partition.state) == ("gpu", "UP")
    assert (partition.max_time_minutes, partition.default_time_minutes) == (7 * 24 * 60, 60)


def test_gpu_reservation(version):
    _, body = captured(version, "reservations")
    # Other tests' reservations may be held at capture time: the capture's own one is named.
    (reservation,) = [r for r in adapter_for(version).decode_reservations(body) if r.name == "capture_resv"]
    assert (reservation.name, reservation.users) == ("capture_resv", ("ptcapture",))
    assert "gres/gpu:a100=2" in reservation.tres
    assert (reservation.end_time - reservation.start_time).total_seconds() == 120 * 60


def test_accounting_record(version):
    _, body = captured(version, "accounting_completed")
    (record,) = adapter_for(version).decode_accounting(body)
    assert record.state == "COMPLETED" and record.is_settled
    assert record.allocated_tres["gres/gpu:a100"] == 1
    assert record.elapsed_seconds >= 20 and record.gpu_seconds == record.elapsed_seconds


def test_submitted_job_id(version):
    _, submitted = captured(version, "submit_ok")
    _, running = captured(version, "job_running")
    assert adapter_for(version).decode_submitted_job_id(submitted) == running["jobs"][0]["job_id"]


def test_a_refused_cancel_is_read_from_status(version):
    status, body = captured(version, "cancel_refused")
    assert status == 200 and body["errors"] == []
    assert adapter_for(version).decode_cancel_refusals(body) == [(2002, "Access/permission denied")]


@pytest.mark.parametrize(
    "name, error_class",
    [
        ("bad_token_jobs", SlurmAuthError),
        ("bad_token_nodes", SlurmAuthError),
        ("job_missing", SlurmNotFound),
        ("submit_too_many_gpus", SlurmRequestError),
    ],
)
def test_error_responses_are_classified(version, name, error_class):
    status, body = captured(version, name)
    with pytest.raises(error_class) as caught:
        _raise_for_response(status, body, name, "")
    assert not caught.value.transient
    assert caught.value.error_number == body["errors"][0]["error_number"]


def test_the_submission_body_is_one_for_every_version(version):
    """Body building is shared: a change to it (a new GRES) serves every version."""
    _, body = captured(version, "submit_ok")
    assert adapter_for(version).encode_submission.__func__ is adapter_for("v0.0.41").encode_submission.__func__
    assert "gres" not in body  # the answer, not the request: nothing echoes a GRES back


# --- what differs, by name ---------------------------------------------------------------------
def test_submit_errors_are_500_on_24_11_and_422_on_26_05():
    assert captured("v0.0.41", "submit_too_many_gpus")[0] == 500
    assert captured("v0.0.42", "submit_too_many_gpus")[0] == 422
    assert captured("v0.0.45", "submit_too_many_gpus")[0] == 422


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_missing_and_finished_jobs_in_cancel_status(version):
    adapter = adapter_for(version)
    assert [code for code, _ in adapter.decode_cancel_refusals(captured(version, "cancel_missing")[1])] == [2017]
    assert [code for code, _ in adapter.decode_cancel_refusals(captured(version, "cancel_done")[1])] == [2021]


def test_v0045_reads_the_expanded_output_paths():
    _, body = captured("v0.0.45", "job_running")
    raw = body["jobs"][0]
    assert raw["standard_error"].endswith("/%j.err")  # the pattern, as submitted
    (job,) = adapter_for("v0.0.45").decode_jobs(body)
    assert job.standard_error == raw["standard_error"].replace("%j", str(job.job_id))
    # v0.0.42 expands it in the old field itself.
    _, body = captured("v0.0.42", "job_running")
    (job,) = adapter_for("v0.0.42").decode_jobs(body)
    assert job.standard_error.endswith(f"/{job.job_id}.err")


def test_ping_answers_responding_in_every_version():
    for version in VERSIONS[1:]:
        _, body = captured(version, "ping")
        assert adapter_for(version).decode_controller_responding(body) is True
    _, body = captured("v0.0.45", "ping")
    assert "pinged" not in body["pings"][0]  # so v0.0.41's reading would say "down"
    assert adapter_for("v0.0.41").decode_controller_responding(body) is False
    assert adapter_for("v0.0.41").decode_controller_responding({"pings": [{"pinged": "UP"}]}) is True


def test_only_v0043_and_later_write_reservations():
    assert not adapter_for("v0.0.41").reservation_writes and not adapter_for("v0.0.42").reservation_writes
    with pytest.raises(NotImplementedError):
        adapter_for("v0.0.42").encode_gpu_reservation(
            GpuReservationRequest(
                "r", gpu_type="a100", count=1, users=["u"], start=datetime.now(UTC), duration_minutes=5
            )
        )
    start = datetime(2027, 1, 2, 10, tzinfo=UTC)
    body = adapter_for("v0.0.45").encode_gpu_reservation(
        GpuReservationRequest("r1", gpu_type="a100", count=2, users=["alice"], start=start, duration_minutes=90)
    )
    assert body["start_time"] == {"set": True, "infinite": False, "number": int(start.timestamp())}
    assert body["duration"]["number"] == 90 and body["users"] == ["alice"]
    assert body["tres"] == [{"type": "gres", "name": "gpu:a100", "count": 2}]


def test_reservation_writes_need_the_slurm_user():
    status, body = captured("v0.0.45", "reservation_create_as_user")
    with pytest.raises(SlurmAuthError):
        _raise_for_response(status, body, "POST reservation", "")
    assert captured("v0.0.45", "reservation_create")[0] == 200
    assert captured("v0.0.45", "reservation_delete")[0] == 200
    status, body = captured("v0.0.45", "reservation_delete_missing")
    with pytest.raises(SlurmRequestError) as caught:
        _raise_for_response(status, body, "DELETE reservation", "")
    assert caught.value.error_number == 2053


# --- detection -----------------------------------------------------------------------------------
def test_served_versions_and_release_from_openapi():
    old, new = parse_openapi(openapi("24.11")), parse_openapi(openapi("26.05"))
    # 24.11 has no info.x-slurm: its versions come from the paths.
    assert old == ServedApi(release="24.11.5", versions=("v0.0.40", "v0.0.41", "v0.0.42"))
    assert new == ServedApi(release="26.05.5", versions=("v0.0.42", "v0.0.43", "v0.0.44", "v0.0.45"))


def test_auto_takes_the_newest_version_with_an_adapter():
    assert choose_version(AUTO, parse_openapi(openapi("24.11"))) == "v0.0.42"
    assert choose_version(AUTO, parse_openapi(openapi("26.05"))) == "v0.0.45"
    assert choose_version(AUTO, ServedApi("25.05.1", ("v0.0.41", "v0.0.42", "v0.0.43"))) == "v0.0.42"


def test_a_pinned_version_must_be_served():
    assert choose_version("v0.0.41", parse_openapi(openapi("24.11"))) == "v0.0.41"
    with pytest.raises(SlurmApiVersionError) as caught:
        choose_version("v0.0.41", parse_openapi(openapi("26.05")), "http://ctl:6820")
    assert "v0.0.41" in caught.value.message and "v0.0.42, v0.0.43, v0.0.44, v0.0.45" in caught.value.message
    assert "26.05.5" in caught.value.message
    with pytest.raises(ValueError, match="no adapter"):
        choose_version("v0.0.44", parse_openapi(openapi("26.05")))
    with pytest.raises(SlurmApiVersionError, match="no API version the portal speaks"):
        choose_version(AUTO, ServedApi("27.11", ("v0.0.47",)))
