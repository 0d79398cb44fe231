"""Names and arguments are matched whole: `re.match(...$)` lets a trailing newline through."""

import pytest

from cluster.commands.cli import SlurmCli
from cluster.commands.provisioning import _check_name


@pytest.mark.parametrize("name", ["alice\n", "alice\nroot", "Alice", "1alice", "", "a" * 33, "al ice"])
def test_bad_cluster_user_names_are_refused(name):
    with pytest.raises(ValueError):
        _check_name(name)


def test_good_cluster_user_names_pass():
    for name in ("alice", "_svc", "bob-2", "a" * 32):
        _check_name(name)


@pytest.mark.parametrize("argument", ["name=alice\n", "x;y", "$(id)", "a b", "a\tb", "`id`"])
def test_unsafe_command_arguments_are_refused_before_running(argument):
    cli = SlurmCli(prefix=["true"], noop=True)
    with pytest.raises(ValueError):
        cli.run("scontrol", argument)
    assert cli.executed == []


@pytest.mark.parametrize("reason", ["disk\n", "x" * 201, "a;b"])
def test_unsafe_reasons_are_refused(reason):
    cli = SlurmCli(prefix=["true"], noop=True)
    with pytest.raises(ValueError):
        cli.drain_node("gpu-a100-01", reason)
    assert cli.executed == []
