"""Reservations on the real Slurm 24.11 dev cluster, through `SlurmCli`'s typed methods.

Windows are a random hour hundreds of days ahead: other tests share the cluster, and a
reservation starting now would keep their jobs off its node.
"""

import random
import secrets
from datetime import UTC, datetime, timedelta

import pytest

from cluster.clusters.services import slurm_cli
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.errors import SlurmCommandError
from cluster.records.hostlist import expand_hostlist

pytestmark = pytest.mark.slurm


def _future_window_start() -> datetime:
    today = datetime.now(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    return today + timedelta(days=random.randint(200, 700), hours=random.randint(0, 23))


def _name(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(4)}"


def _cores(node: str) -> int:
    shown = slurm_cli().run("scontrol", "show", "-o", "node", node).stdout
    return int(shown.split("CPUTot=")[1].split()[0])


def _nodes_reserved_across(slurm, start: datetime, end: datetime, but: str) -> set[str]:
    """The nodes of every reservation other than `but` whose window overlaps [start, end)."""
    return {
        node
        for reservation in slurm.list_reservations()
        if reservation.name != but
        and (reservation.start_time is None or reservation.start_time < end)
        and (reservation.end_time is None or start < reservation.end_time)
        for node in expand_hostlist(reservation.nodes)
    }


def test_a_gpu_reservation_for_a_user_is_created_read_back_changed_and_deleted(slurm, cluster_users):
    cli = slurm_cli()
    user = cluster_users[0]
    name = _name("ptresv")
    start = _future_window_start()
    try:
        window_end = start + timedelta(minutes=90)
        reserved_before = _nodes_reserved_across(slurm, start, window_end, but=name)
        result = cli.create_gpu_reservation(
            GpuReservationRequest(name, gpu_type="a100", count=2, users=[user], start=start, duration_minutes=90)
        )
        assert f"Reservation created: {name}" in result.stdout

        shown = cli.show_reservation(name)
        assert shown.users == (user,)
        assert (shown.start_time, shown.end_time) == (start, start + timedelta(minutes=90))
        tres = dict(item.split("=", 1) for item in shown.tres.split(","))
        assert tres["gres/gpu:a100"] == "2" and tres["gres/gpu"] == "2"
        # The trap to know: Slurm picks one A100 node and takes, with the GPUs, every core of it
        # that nothing else holds in the window: it leaves out the cores of running jobs that
        # reach into the window and of overlapping reservations, not those of jobs that end
        # before it starts (slurmctld's reservation.c). No job reaches a window months ahead
        # (MaxTime is 7 days), so a job running on the node now changes nothing: every core,
        # unless another test's reservation overlaps (random windows; rare).
        assert shown.nodes in ("gpu-a100-01", "gpu-a100-02")
        reserved = reserved_before | _nodes_reserved_across(slurm, start, window_end, but=name)
        if shown.nodes not in reserved:
            assert int(tres["cpu"]) == _cores(shown.nodes)
        # slurmrestd reads the same reservation.
        (listed,) = [r for r in slurm.list_reservations() if r.name == name]
        assert (listed.users, listed.start_time, listed.end_time) == (shown.users, shown.start_time, shown.end_time)
        assert "gres/gpu:a100=2" in listed.tres

        cli.update_reservation(name, duration_minutes=30)
        shorter = cli.show_reservation(name)
        assert (shorter.start_time, shorter.end_time) == (start, start + timedelta(minutes=30))
        later = start + timedelta(hours=2)
        cli.update_reservation(name, start=later)
        moved = cli.show_reservation(name)
        assert (moved.start_time, moved.end_time) == (later, later + timedelta(minutes=30))

        with pytest.raises(SlurmCommandError, match="Duplicate reservation name"):
            cli.create_gpu_reservation(
                GpuReservationRequest(name, gpu_type="a100", count=1, users=[user], start=start, duration_minutes=5)
            )

        cli.delete_reservation(name)
        assert cli.show_reservation(name) is None
        assert not [r for r in slurm.list_reservations() if r.name == name]
    finally:
        cli.delete_reservation(name, check=False)


def test_a_maintenance_hold_on_a_node_as_gpu_reset_makes_it(slurm, cluster_users):
    cli = slurm_cli()
    name = _name("pthold")
    start = _future_window_start()
    try:
        cli.create_node_reservation(
            name, nodes=["gpu-4090-02"], users=[cluster_users[1]], start=start, duration_minutes=120
        )
        shown = cli.show_reservation(name)
        assert shown.nodes == "gpu-4090-02"
        assert {"MAINT", "IGNORE_JOBS"} <= set(shown.flags)
        assert shown.users == (cluster_users[1],)
        assert shown.end_time - shown.start_time == timedelta(minutes=120)
        cli.delete_reservation(name)
        assert cli.show_reservation(name) is None
    finally:
        cli.delete_reservation(name, check=False)


def test_slurms_refusals_are_command_errors_with_its_words(slurm, cluster_users):
    cli = slurm_cli()
    with pytest.raises(SlurmCommandError, match="Requested reservation is invalid"):
        cli.delete_reservation(_name("ptnone"))
    with pytest.raises(SlurmCommandError, match="Requested reservation is invalid"):
        cli.update_reservation(_name("ptnone"), duration_minutes=5)
    name = _name("ptbig")
    try:
        # More A100s than the pool has.
        with pytest.raises(SlurmCommandError):
            cli.create_gpu_reservation(GpuReservationRequest(
                name, gpu_type="a100", count=64, users=[cluster_users[0]], start=_future_window_start(),
                duration_minutes=10,
            ))  # fmt: skip
        assert cli.show_reservation(name) is None
    finally:
        cli.delete_reservation(name, check=False)
