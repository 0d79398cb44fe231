"""Reservation commands as argument lists (noop), the checks in front of them, and the
parsing of `scontrol show -o reservation`: no cluster needed."""

from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import pytest

from cluster.commands.cli import SlurmCli, parse_reservation_line
from cluster.commands.reservation_request import NOW, GpuReservationRequest
from cluster.errors import SlurmCommandError, SlurmTransientError

PREFIX = ["/not/run"]
UTC_SCONTROL = [*PREFIX, "env", "TZ=UTC0", "SLURM_TIME_FORMAT=standard", "scontrol"]
START = datetime(2027, 5, 3, 12, 0, tzinfo=ZoneInfo("Europe/Berlin"))  # 10:00 UTC (summer time)

# Lines as `env TZ=UTC0 scontrol show -o reservation <name>` printed them on the 24.11 dev cluster.
GPU_LINE = (
    "ReservationName=exp_tres5 StartTime=2026-12-31T10:00:00 EndTime=2026-12-31T11:00:00 Duration=01:00:00 "
    "Nodes=gpu-a100-[01-02] NodeCnt=2 CoreCnt=32 Features=(null) PartitionName=gpu Flags=   "
    "NodeName=gpu-a100-01 CoreIDs=0-15   NodeName=gpu-a100-02 CoreIDs=0-15 TRES=cpu=32,gres/gpu:a100=6,gres/gpu=6 "
    "Users=root,ptabc Groups=(null) Accounts=(null) Licenses=(null) State=INACTIVE BurstBuffer=(null) "
    "MaxStartDelay=(null)"
)
NODE_LINE = (
    "ReservationName=gpureset_7 StartTime=2026-11-30T16:32:35 EndTime=2026-11-30T18:32:35 Duration=02:00:00 "
    "Nodes=gpu-h100-01 NodeCnt=1 CoreCnt=16 Features=(null) PartitionName=(null) "
    "Flags=MAINT,IGNORE_JOBS,SPEC_NODES,PURGE_COMP=00:05:00 TRES=cpu=16 Users=ada Groups=(null) Accounts=(null) "
    "Licenses=(null) State=ACTIVE BurstBuffer=(null) MaxStartDelay=(null)"
)


def noop_cli() -> SlurmCli:
    return SlurmCli(prefix=list(PREFIX), noop=True)


def test_a_gpu_reservation_is_one_argument_list_with_its_start_in_utc():
    cli = noop_cli()
    cli.create_gpu_reservation(
        GpuReservationRequest(
            "train_42", gpu_type="a100", count=2, users=["alice", "bob"], start=START, duration_minutes=90
        )
    )
    assert cli.executed == [
        [
            *UTC_SCONTROL,
            "create",
            "reservation",
            "ReservationName=train_42",
            "StartTime=2027-05-03T10:00:00",
            "Duration=90",
            "Users=alice,bob",
            "TRES=gres/gpu:a100=2",
        ]
    ]


def test_a_node_reservation_is_a_maintenance_hold_by_default():
    cli = noop_cli()
    cli.create_node_reservation("gpureset_7", nodes=["gpu-h100-01"], users=["ada"], start=NOW, duration_minutes=120)
    assert cli.executed[0][len(UTC_SCONTROL) :] == [
        "create",
        "reservation",
        "ReservationName=gpureset_7",
        "StartTime=now",
        "Duration=120",
        "Users=ada",
        "Nodes=gpu-h100-01",
        "Flags=MAINT,IGNORE_JOBS",
    ]


def test_update_delete_and_show_name_the_reservation():
    cli = noop_cli()
    cli.update_reservation("r1", duration_minutes=30, start=datetime(2027, 1, 2, 3, 4, 5, 678, tzinfo=UTC))
    cli.update_reservation("r1", users=["carol"])
    cli.delete_reservation("r1")
    assert cli.show_reservation("r1") is None  # noop: nothing was asked
    tails = [argv[len(UTC_SCONTROL) :] for argv in cli.executed]
    assert tails == [
        ["update", "ReservationName=r1", "StartTime=2027-01-02T03:04:05", "Duration=30"],
        ["update", "ReservationName=r1", "Users=carol"],
        ["delete", "ReservationName=r1"],
        ["show", "-o", "reservation", "r1"],
    ]


GOOD = {"gpu_type": "a100", "count": 2, "users": ["alice"], "start": START, "duration_minutes": 60}


@pytest.mark.parametrize(
    "name, changes",
    [
        ("r;id", {}),
        ("r 1", {}),
        ("r1\n", {}),
        ("-r1", {}),
        ("r" * 65, {}),
        ("r1", {"gpu_type": "a100=9,gres/gpu:h100"}),
        ("r1", {"gpu_type": ""}),
        ("r1", {"count": 0}),
        ("r1", {"count": -1}),
        ("r1", {"count": True}),
        ("r1", {"count": "2"}),
        ("r1", {"count": 2.0}),
        ("r1", {"users": "alice"}),  # a string, not a list: would become a,l,i,c,e
        ("r1", {"users": []}),
        ("r1", {"users": ["Alice"]}),
        ("r1", {"users": ["alice,root"]}),
        ("r1", {"users": ["alice\n"]}),
        ("r1", {"start": datetime(2027, 5, 3, 12, 0)}),  # no zone: which noon?
        ("r1", {"start": date(2027, 5, 3)}),
        ("r1", {"start": "2027-05-03T12:00:00"}),
        ("r1", {"start": "now+1hour"}),
        ("r1", {"duration_minutes": 0}),
        ("r1", {"duration_minutes": 1.5}),
        ("r1", {"duration_minutes": True}),
        ("r1", {"duration_minutes": "60"}),
        ("r1", {"duration_minutes": 366 * 24 * 60 + 1}),
        ("r1", {"flags": ["BOGUS"]}),
        ("r1", {"flags": ["ANY_NODES"]}),  # with a GPU TRES it reserves no GPU at all
        ("r1", {"flags": "MAINT"}),
        ("r1", {"flags": ["PURGE_COMP=1"]}),
    ],
)
def test_unsafe_or_malformed_gpu_reservations_are_refused_before_anything_runs(name, changes):
    cli = noop_cli()
    with pytest.raises(ValueError):
        cli.create_gpu_reservation(GpuReservationRequest(name, **{**GOOD, **changes}))
    assert cli.executed == []


@pytest.mark.parametrize(
    "changes",
    [
        {"nodes": "gpu-h100-01"},
        {"nodes": []},
        {"nodes": ["gpu-h100-01;reboot"]},
        {"nodes": ["gpu-a100-[01-02]"]},
        {"flags": ["SPEC_NODES"]},
        {"start": "tomorrow"},
    ],
)
def test_malformed_node_reservations_are_refused_before_anything_runs(changes):
    cli = noop_cli()
    arguments = {"nodes": ["gpu-h100-01"], "users": ["ada"], "start": NOW, "duration_minutes": 10, **changes}
    with pytest.raises(ValueError):
        cli.create_node_reservation("hold1", **arguments)
    assert cli.executed == []


@pytest.mark.parametrize(
    "call",
    [
        lambda cli: cli.update_reservation("r1"),
        lambda cli: cli.update_reservation("r1", start=NOW),  # an update moves to a real time
        lambda cli: cli.update_reservation("r1", duration_minutes=-5),
        lambda cli: cli.update_reservation("r 1", duration_minutes=5),
        lambda cli: cli.delete_reservation("r1 r2"),
        lambda cli: cli.show_reservation("$(id)"),
    ],
)
def test_malformed_updates_deletes_and_shows_are_refused_before_anything_runs(call):
    cli = noop_cli()
    with pytest.raises(ValueError):
        call(cli)
    assert cli.executed == []


def test_a_gpu_reservation_line_is_parsed_with_its_tres_users_and_utc_window():
    shown = parse_reservation_line(GPU_LINE)
    assert shown.name == "exp_tres5"
    assert shown.nodes == "gpu-a100-[01-02]"
    assert shown.tres == "cpu=32,gres/gpu:a100=6,gres/gpu=6"
    assert shown.users == ("root", "ptabc")
    assert shown.start_time == datetime(2026, 12, 31, 10, 0, tzinfo=UTC)
    assert (shown.end_time - shown.start_time).total_seconds() == 3600
    assert shown.flags == ()


def test_a_node_reservation_line_keeps_flag_names_only():
    shown = parse_reservation_line(NODE_LINE)
    assert shown.flags == ("MAINT", "IGNORE_JOBS", "SPEC_NODES", "PURGE_COMP")
    assert shown.nodes == "gpu-h100-01" and shown.tres == "cpu=16" and shown.users == ("ada",)


def test_a_line_that_is_not_a_reservation_is_none():
    assert parse_reservation_line("No reservations in the system") is None


def test_show_answers_none_for_a_missing_reservation_and_raises_on_other_failures():
    # `sh -c SCRIPT` takes the rest of the argument list as $0, $1, ...: never a shell parse of them.
    missing = SlurmCli(prefix=["sh", "-c", "echo 'Reservation r1 not found'; exit 1"])
    assert missing.show_reservation("r1") is None
    down = SlurmCli(prefix=["sh", "-c", "echo 'Unable to contact slurm controller (connect failure)' >&2; exit 1"])
    with pytest.raises(SlurmTransientError):
        down.show_reservation("r1")
    odd = SlurmCli(prefix=["sh", "-c", "echo 'Invalid reservation name' >&2; exit 1"])
    with pytest.raises(SlurmCommandError, match="Invalid"):
        odd.show_reservation("r1")


def test_show_reads_the_named_reservation_from_scontrols_output():
    script = f"printf '%s\\n' '{GPU_LINE}'"
    assert SlurmCli(prefix=["sh", "-c", script]).show_reservation("exp_tres5").tres.endswith("gres/gpu=6")
    assert SlurmCli(prefix=["sh", "-c", script]).show_reservation("other") is None
