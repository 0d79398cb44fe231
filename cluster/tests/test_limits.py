"""What sacctmgr takes and prints for limits, read and written in one place."""

import pytest

from cluster.commands.limits import (
    AssociationLimits,
    QosLimits,
    format_tres,
    parse_association_lines,
    parse_qos_lines,
    parse_tres,
    parse_wall_minutes,
)


@pytest.mark.parametrize(
    "text, minutes",
    [("", None), ("04:00:00", 240), ("1-00:00:00", 1440), ("7-00:00:00", 10080), ("30:00", 30), ("00:00:30", 1)],
)
def test_wall_times_as_sacctmgr_prints_them(text, minutes):
    assert parse_wall_minutes(text) == minutes


def test_a_malformed_wall_time_is_an_error():
    with pytest.raises(ValueError):
        parse_wall_minutes("four hours")


def test_tres_round_trip_sorted():
    tres = {"gres/shard:a100": 20, "gres/gpu:a100": 2, "gres/gpu:h100": 0}
    assert format_tres(tres) == "gres/gpu:a100=2,gres/gpu:h100=0,gres/shard:a100=20"
    assert parse_tres(format_tres(tres)) == tres


def test_qos_lines_parse_into_limits_and_differences_name_each_field():
    # As `sacctmgr -n -P show qos format=Name,Priority,MaxWall,MaxTRESPU,Flags` prints them.
    shown = parse_qos_lines("free|1000|04:00:00|gres/gpu:a100=0,gres/gpu:rtx4090=1|DenyOnLimit\npro|5000|||\n")
    assert shown["free"] == QosLimits("free", 1000, 240, {"gres/gpu:a100": 0, "gres/gpu:rtx4090": 1}, True)
    assert shown["pro"].max_wall_minutes is None and not shown["pro"].deny_on_limit
    wanted = QosLimits("free", 1000, 240, {"gres/gpu:a100": 0, "gres/gpu:rtx4090": 1, "gres/gpu:h100": 0})
    assert wanted.differences(shown["free"]) == ["QOS free: MaxTRESPerUser gres/gpu:h100 is None, the plan says 0"]
    assert wanted.differences(None) == ["QOS free does not exist"]
    assert wanted.set_arguments() == [
        "Priority=1000",
        "MaxWall=240",
        "MaxTRESPerUser=gres/gpu:a100=0,gres/gpu:h100=0,gres/gpu:rtx4090=1",
        "Flags=DenyOnLimit",
        "Preempt=",  # an empty list clears it (seen on 24.11: Preempt='' is refused without a shell)
        "PreemptMode=cluster",
        "GraceTime=0",
        "PreemptExemptTime=-1",
    ]


def test_preemption_settings_round_trip_through_sacctmgrs_format():
    # As `sacctmgr -n -P show qos` prints them with QOS_FORMAT (24.11, after the spot QOS was set).
    text = (
        "pro|5000|1-00:00:00|gres/gpu:a100=2|DenyOnLimit|spot|cluster|00:00:00|\n"
        "spot|0|01:00:00||DenyOnLimit||requeue|00:02:00|00:05:00\n"
    )
    shown = parse_qos_lines(text)
    spot = QosLimits("spot", 0, 60, preempt_mode="requeue", grace_seconds=120, preempt_exempt_seconds=300)
    assert shown["spot"] == spot and spot.differences(shown["spot"]) == []
    assert "GraceTime=120" in spot.set_arguments() and "PreemptExemptTime=00:05:00" in spot.set_arguments()
    pro = QosLimits("pro", 5000, 1440, {"gres/gpu:a100": 2}, preempt=("spot",))
    assert pro.differences(shown["pro"]) == [] and "Preempt=spot" in pro.set_arguments()
    unpreempting = QosLimits("pro", 5000, 1440, {"gres/gpu:a100": 2})
    assert unpreempting.differences(shown["pro"]) == ["QOS pro: Preempt is ('spot',), the plan says ()"]


def test_association_lines_skip_account_rows_and_read_the_gpu_budget():
    text = "|portal|free,premium,pro|free||\nalice|portal|free|free|gres/gpu=600|\nbob|portal|pro|pro||0\n"
    shown = parse_association_lines(text)
    assert set(shown) == {("alice", "portal"), ("bob", "portal")}
    assert shown[("alice", "portal")].gpu_minutes == 600 and shown[("alice", "portal")].max_submit_jobs is None
    assert shown[("bob", "portal")].max_submit_jobs == 0


def test_association_arguments_clear_what_the_plan_does_not_set():
    limits = AssociationLimits("bob", "portal", ("pro",), "pro")
    assert limits.set_arguments() == ["QOS=pro", "DefaultQOS=pro", "GrpTRESMins=gres/gpu=-1", "MaxSubmitJobs=-1"]
    held = AssociationLimits("bob", "portal", ("pro",), "pro", gpu_minutes=600, max_submit_jobs=0)
    assert held.set_arguments()[2:] == ["GrpTRESMins=gres/gpu=600", "MaxSubmitJobs=0"]
    assert held.differences(limits) == [
        "bob: GrpTRESMins gres/gpu is None, the plan says 600",
        "bob: MaxSubmitJobs is None, the plan says 0",
    ]
