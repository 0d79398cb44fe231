import pytest

from cluster.commands.cli import SlurmCli
from cluster.errors import SlurmCommandError, SlurmTransientError


def test_noop_records_the_argument_list_and_runs_nothing():
    cli = SlurmCli(prefix=["/definitely/not/a/binary"], noop=True)
    result = cli.drain_node("gpu-a100-01", "GPU 2 fell off the bus")
    assert result.returncode == 0
    assert cli.executed == [
        [
            "/definitely/not/a/binary",
            "scontrol",
            "update",
            "NodeName=gpu-a100-01",
            "State=DRAIN",
            "Reason=GPU 2 fell off the bus",
        ]
    ]


@pytest.mark.parametrize("evil", ["a;rm -rf /", "$(id)", "`id`", "x y", "a|b", "a>b", "a\nb", "'q'"])
def test_shell_metacharacters_are_refused_before_anything_runs(evil):
    cli = SlurmCli(prefix=["echo"], noop=True)
    with pytest.raises(ValueError, match="unsafe"):
        cli.run("scontrol", "show", "node", evil)
    assert cli.executed == []


def test_reason_text_is_checked_too():
    cli = SlurmCli(prefix=["echo"], noop=True)
    with pytest.raises(ValueError, match="reason"):
        cli.drain_node("n1", "ok; reboot")


def test_prefix_and_arguments_run_without_a_shell():
    # `echo` receives the words as separate arguments: no shell ever parses them.
    result = SlurmCli(prefix=["echo", "prefix"]).run("scontrol", "show", "Reason=x")
    assert result.stdout.strip() == "prefix scontrol show Reason=x"


def test_failures_are_classified():
    controller_down = SlurmCli(prefix=["sh", "-c", "echo 'Unable to contact slurm controller' >&2; exit 1"])
    with pytest.raises(SlurmTransientError):
        controller_down.run("scontrol", "ping")
    bad_request = SlurmCli(prefix=["sh", "-c", "echo 'Invalid node name specified' >&2; exit 1"])
    with pytest.raises(SlurmCommandError, match="Invalid"):
        bad_request.run("scontrol", "show", "node", "x")
