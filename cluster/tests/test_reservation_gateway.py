"""cluster.clusters.reservation_gateway: one set of reservation calls, over REST where slurmrestd can
create reservations (Slurm 26.05), with scontrol otherwise (24.11). The live test runs on
whichever cluster the run points at (scripts/test.sh runs it on both)."""

import random
import secrets
from datetime import UTC, datetime, timedelta

import pytest

from cluster.clusters.reservation_gateway import ReservationGateway, reservation_gateway
from cluster.clusters.services import slurm_cli
from cluster.commands.cli import SlurmCli
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import SlurmError, SlurmNotFound
from cluster.records.types import Reservation
from cluster.slurmrest.registry import adapter_for

START = datetime(2030, 1, 2, 10, tzinfo=UTC)


class RecordingService:
    """A REST client stand-in holding reservations in a dict."""

    def __init__(self, version="v0.0.45"):
        self.adapter = adapter_for(version)
        self.held: dict[str, Reservation] = {}

    def list_reservations(self):
        return list(self.held.values())

    def create_gpu_reservation(self, request):
        end = request.start + timedelta(minutes=request.duration_minutes)
        self.held[request.name] = Reservation(request.name, request.users, "", request.start, end, "", ())

    def delete_reservation(self, name):
        if self.held.pop(name, None) is None:
            raise SlurmNotFound(f"{name} is invalid", error_number=2053)


def test_rest_is_used_where_the_version_writes_reservations_and_a_taken_name_is_refused():
    service, cli = RecordingService(), SlurmCli(prefix=["false"])
    gateway = ReservationGateway(cli, service)
    gateway.create_gpu_reservation(
        GpuReservationRequest("r1", gpu_type="a100", count=1, users=["u1", "u1"], start=START, duration_minutes=30)
    )
    assert gateway.show_reservation("r1").users == ("u1",)
    # POST /reservation would update the existing one: the gateway refuses as scontrol does.
    with pytest.raises(SlurmError, match="Duplicate reservation name"):
        gateway.create_gpu_reservation(
            GpuReservationRequest("r1", gpu_type="a100", count=2, users=["u2"], start=START, duration_minutes=5)
        )
    assert service.held["r1"].end_time == START + timedelta(minutes=30)
    gateway.delete_reservation("r1")
    with pytest.raises(SlurmNotFound):
        gateway.delete_reservation("r1")
    gateway.delete_reservation("r1", check=False)
    assert cli.executed == []


@pytest.mark.parametrize("version", ["v0.0.42", "v0.0.45"])
def test_scontrol_is_used_below_v0043_and_in_noop_mode(version):
    """v0.0.42 cannot write reservations; v0.0.45 can, but noop mode writes nothing (the CLI
    logs what it would run, and a noop run must never reach Slurm over REST either)."""
    service = RecordingService(version)
    cli = SlurmCli(prefix=["chroot", "/nowhere"], noop=True)
    gateway = ReservationGateway(cli, service)
    gateway.create_gpu_reservation(
        GpuReservationRequest("r2", gpu_type="h100", count=2, users=["u1"], start=START, duration_minutes=60)
    )
    gateway.delete_reservation("r2")
    words = [argv[argv.index("scontrol") + 1 :][:2] for argv in cli.executed]
    assert words == [["create", "reservation"], ["delete", "ReservationName=r2"]]
    assert service.held == {}


def test_bad_arguments_are_refused_before_either_path():
    service = RecordingService()
    gateway = ReservationGateway(SlurmCli(prefix=["false"]), service)
    for bad in ({"gpu_type": "a100;x"}, {"count": 0}, {"users": "alice"}, {"duration_minutes": 0}):
        arguments = {"gpu_type": "a100", "count": 1, "users": ["u1"], "start": START, "duration_minutes": 5, **bad}
        with pytest.raises(ValueError):
            gateway.create_gpu_reservation(GpuReservationRequest("r3", **arguments))
    with pytest.raises(ValueError):
        gateway.create_gpu_reservation(
            GpuReservationRequest(
                "r3", gpu_type="a100", count=1, users=["u1"], start=START.replace(tzinfo=None), duration_minutes=5
            )
        )
    assert service.held == {}


@pytest.mark.slurm
def test_a_gpu_reservation_through_the_gateway_on_the_cluster(slurm, cluster_users):
    gateway, cli = reservation_gateway(), slurm_cli()
    name = f"ptgw_{secrets.token_hex(4)}"
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    start = today + timedelta(days=random.randint(200, 700), hours=random.randint(0, 23))
    assert gateway.over_rest == slurm.adapter.reservation_writes
    try:
        gateway.create_gpu_reservation(
            GpuReservationRequest(
                name, gpu_type="a100", count=2, users=[cluster_users[0]], start=start, duration_minutes=90
            )
        )
        # scontrol and slurmrestd both see what either path made.
        for held in (gateway.show_reservation(name), cli.show_reservation(name)):
            assert held.users == (cluster_users[0],)
            assert (held.start_time, held.end_time) == (start, start + timedelta(minutes=90))
            assert "gres/gpu:a100=2" in held.tres and held.nodes.startswith("gpu-a100-")
        with pytest.raises(SlurmError, match="Duplicate reservation name"):
            gateway.create_gpu_reservation(
                GpuReservationRequest(
                    name, gpu_type="a100", count=1, users=[cluster_users[1]], start=start, duration_minutes=5
                )
            )
        assert cli.show_reservation(name).end_time == start + timedelta(minutes=90)
        gateway.delete_reservation(name)
        assert cli.show_reservation(name) is None
        with pytest.raises(SlurmError, match="(?i)invalid"):
            gateway.delete_reservation(name)
    finally:
        cli.delete_reservation(name, check=False)
