"""Tests for gpu_healthcheck.py: each rule of the health check, without a GPU or Slurm.

The pure policy (`evaluate`) is driven with hand-made observations; the I/O layer with a
fake `runner`; and the real script is run end to end against fake `nvidia-smi` and
`scontrol` executables (shell scripts in tmp_path), including a real 5 s-style timeout.
"""

from __future__ import annotations

import importlib.util
import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).with_name("gpu_healthcheck.py")
_spec = importlib.util.spec_from_file_location("gpu_healthcheck", SCRIPT)
hc = importlib.util.module_from_spec(_spec)
sys.modules["gpu_healthcheck"] = hc  # dataclasses look their module up while the file executes
_spec.loader.exec_module(hc)

NODE = "gpu-a100-02"
LEAK = "GPU 3 memory > 95% for 3 checks (possible leak)"
CONFIG = hc.Config()

# Captured from the dev cluster (Slurm 24.11.5): `scontrol -d show node gpu-a100-02` with
# one job on gres/gpu:a100:2 and one on gres/shard:a100:3, after our own drain. Kept
# byte for byte (trailing blanks included) in a data file.
SHOW_NODE_DRAINED = (Path(__file__).parent / "testdata" / "scontrol_show_node_drained.txt").read_text()


def show_node(state: str = "IDLE", gres_used: str = "gpu:a100:0(IDX:N/A),shard:a100:0(0/10,0/10,0/10,0/10)", reason=""):
    """The same node, idle and healthy by default."""
    text = (
        f"NodeName={NODE} Arch=x86_64 CoresPerSocket=1 \n"
        "   Gres=gpu:a100:4,shard:a100:40\n"
        "   GresDrain=N/A\n"
        f"   GresUsed={gres_used}\n"
        f"   State={state} ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Partitions=gpu \n"
    )
    if reason:
        text += f"   \n   Reason={reason} [root@2026-11-29T21:18:07]\n"
    return text


def smi_csv(used=(1000, 1000, 1000, 1000), total=40960, minors=None):
    minors = list(minors) if minors is not None else list(range(len(used)))
    return "".join(
        f"{i}, GPU-{i:08d}-aaaa-bbbb-cccc-000000000000, {minors[i]}, {u}, {total}\n" for i, u in enumerate(used)
    )


def gpu(index, used=1000, total=40960, minor=None):
    return hc.GpuSample(index=index, uuid=f"GPU-{index}", minor=minor, used_mib=used, total_mib=total)


FULL = 40000  # of 40960 MiB: 97.7 %


def observation(used=(1000, 1000, 1000, 1000), **kwargs):
    values = {
        "node": NODE,
        "gpus": tuple(gpu(i, u) for i, u in enumerate(used)),
        "expected_gpus": 4,
        "node_state": "IDLE",
        "allocated": frozenset(),
    }
    values.update(kwargs)
    return hc.Observation(**values)


def run_checks(observations, state=None, config=CONFIG):
    """Feed observations one after another, carrying the state; return every decision."""
    state = state or hc.State(node=NODE)
    decisions = []
    for obs in observations:
        decision = hc.evaluate(obs, state, config)
        decisions.append(decision)
        state = decision.new_state
    return decisions


class FakeRunner:
    """Stands in for subprocess: canned results by command, and a record of every call."""

    def __init__(self, smi=None, show=None, update=None):
        self.smi = smi or hc.CommandResult(0, smi_csv())
        self.show = show or hc.CommandResult(0, show_node())
        self.update = update or hc.CommandResult(0)
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append((list(argv), timeout))
        if "nvidia-smi" in argv[0]:
            return self.smi
        if argv[1:3] == ["-d", "show"]:
            return self.show
        return self.update

    @property
    def updates(self):
        return [argv for argv, _ in self.calls if "update" in argv]


def run_main(tmp_path, runner, *extra):
    argv = ["--node", NODE, "--state-file", str(tmp_path / "state.json"), "--no-syslog"]
    argv += ["--scontrol", "/usr/bin/scontrol", "--nvidia-smi", "/usr/bin/nvidia-smi", *extra]
    assert hc.main(argv, runner=runner) == 0


# ------------------------------------------------------------ rule 1: the driver


def test_driver_answering_late_drains_with_timeout_reason():
    decision = hc.evaluate(observation(gpus=(), smi_timed_out=True), hc.State(), CONFIG)
    assert decision.action == "drain"
    assert decision.reason == "gpu_healthcheck: driver did not answer within 5 s"


def test_timeout_reason_follows_the_configured_timeout():
    decision = hc.evaluate(observation(gpus=(), smi_timed_out=True), hc.State(), hc.Config(timeout=2.5))
    assert decision.reason == "gpu_healthcheck: driver did not answer within 2.5 s"


def test_nvidia_smi_failing_drains_with_its_message(tmp_path):
    message = (
        "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
        "Make sure that the latest NVIDIA driver is installed and running.\n\n"
    )
    runner = FakeRunner(smi=hc.CommandResult(9, message))
    run_main(tmp_path, runner)
    assert runner.updates == [
        [
            "/usr/bin/scontrol",
            "update",
            f"NodeName={NODE}",
            "State=DRAIN",
            "Reason=gpu_healthcheck: nvidia-smi failed (exit 9): NVIDIA-SMI has failed because it couldn't "
            "communicate with the NVIDIA driver. Make sure that the latest NVIDIA driver is installed and running.",
        ]
    ]


def test_nvidia_smi_missing_drains(tmp_path):
    runner = FakeRunner(smi=hc.run_command([str(tmp_path / "no-such-nvidia-smi")], 5))
    run_main(tmp_path, runner)
    [update] = runner.updates
    assert update[-1].startswith("Reason=gpu_healthcheck: nvidia-smi not found or not executable")


def test_unreadable_nvidia_smi_output_drains():
    runner = FakeRunner(smi=hc.CommandResult(0, "No devices were found, maybe\n"))
    args = hc.build_parser().parse_args(["--nvidia-smi", "nvidia-smi"])
    obs = hc.observe(NODE, args, runner)
    assert obs.smi_error.startswith("nvidia-smi output unreadable")
    assert hc.evaluate(obs, hc.State(), CONFIG).action == "drain"


def test_fewer_gpus_than_the_node_gres_drains(tmp_path):
    runner = FakeRunner(smi=hc.CommandResult(0, smi_csv(used=(1000, 1000, 1000))))
    run_main(tmp_path, runner)
    [update] = runner.updates
    assert update[-1] == "Reason=gpu_healthcheck: only 3 of 4 GPUs visible to nvidia-smi"


def test_expect_gpus_overrides_the_gres_count(tmp_path):
    runner = FakeRunner(smi=hc.CommandResult(0, smi_csv(used=(1000, 1000))))
    run_main(tmp_path, runner, "--expect-gpus", "2")
    assert runner.updates == []
    run_main(tmp_path, runner, "--expect-gpus", "8")
    assert runner.updates[-1][-1] == "Reason=gpu_healthcheck: only 2 of 8 GPUs visible to nvidia-smi"


def test_all_gpus_present_and_quiet_is_healthy():
    decision = hc.evaluate(observation(), hc.State(), CONFIG)
    assert (decision.action, decision.reason, decision.failures) == ("none", "", ())


# -------------------------------------------------------------- rule 2: the leak


def test_memory_high_once_or_twice_does_nothing_three_times_drains():
    high = observation(used=(1000, 1000, 1000, FULL))
    first, second, third = run_checks([high, high, high])
    assert (first.action, second.action) == ("none", "none")
    assert first.new_state.high == {"GPU-3": 1}
    assert second.new_state.high == {"GPU-3": 2}
    assert third.action == "drain"
    assert third.reason == f"gpu_healthcheck: {LEAK}"


def test_exactly_95_percent_is_not_high():
    at_line = observation(used=(1000, 1000, 1000, 0.95 * 40960))
    assert [d.action for d in run_checks([at_line] * 4)] == ["none"] * 4


def test_counter_resets_when_memory_drops():
    high, low = observation(used=(1000, 1000, 1000, FULL)), observation()
    decisions = run_checks([high, high, low, high, high])
    assert [d.action for d in decisions] == ["none"] * 5
    assert decisions[2].new_state.high == {}
    assert decisions[-1].new_state.high == {"GPU-3": 2}


def test_a_full_gpu_held_by_a_job_never_counts():
    held = observation(used=(1000, 1000, 1000, FULL), allocated=frozenset({3}))
    decisions = run_checks([held] * 5)
    assert [d.action for d in decisions] == ["none"] * 5
    assert decisions[-1].new_state.high == {}


def test_a_job_starting_on_the_gpu_restarts_the_count():
    free = observation(used=(1000, 1000, 1000, FULL))
    held = observation(used=(1000, 1000, 1000, FULL), allocated=frozenset({3}))
    decisions = run_checks([free, free, held, free, free])
    assert [d.action for d in decisions] == ["none"] * 5


def test_gpus_held_through_shards_count_as_held():
    allocated = hc.allocated_from_gres_used("gpu:a100:2(IDX:0-1),shard:a100:3(0/10,0/10,3/10,0/10)")
    assert allocated == frozenset({0, 1, 2})
    all_full = observation(used=(FULL, FULL, FULL, FULL), allocated=allocated)
    third = run_checks([all_full] * 3)[-1]
    assert third.action == "drain"
    assert third.failures == (LEAK,)  # GPUs 0-2 belong to jobs; only the free GPU 3 leaks


def test_allocation_unknown_neither_counts_nor_forgets():
    high = observation(used=(1000, 1000, 1000, FULL))
    unknown = observation(used=(1000, 1000, 1000, FULL), allocated=None)
    decisions = run_checks([high, high, unknown, unknown, high])
    assert [d.new_state.high.get("GPU-3") for d in decisions] == [1, 2, 2, 2, 3]
    assert decisions[-1].action == "drain"


def test_slurm_index_follows_device_minor_number_not_nvidia_smi_index():
    # nvidia-smi's GPU 0 is /dev/nvidia1: Slurm calls it index 1, and the job on IDX 1 owns it.
    gpus = (gpu(0, FULL, minor=1), gpu(1, 1000, minor=0))
    assert hc.slurm_index_map(gpus) == {0: 1, 1: 0}
    assert hc.slurm_index_map(gpus, by="index") == {0: 0, 1: 1}
    obs = observation(gpus=gpus, expected_gpus=2, allocated=frozenset({1}))
    assert [d.action for d in run_checks([obs] * 3)] == ["none"] * 3
    by_index = run_checks([obs] * 3, config=hc.Config(slurm_index_by="index"))
    assert by_index[-1].failures == ("GPU 0 memory > 95% for 3 checks (possible leak)",)


def test_leak_drain_is_not_repeated_and_resumes_once_memory_is_freed():
    leak_state = hc.State(high={"GPU-3": 3}, node=NODE)
    ours = {"node_state": "IDLE+DRAIN", "node_reason": f"gpu_healthcheck: {LEAK}"}
    still = hc.evaluate(observation(used=(1000, 1000, 1000, FULL), **ours), leak_state, CONFIG)
    assert still.action == "none"
    assert still.new_state.high == {"GPU-3": 4}
    freed = hc.evaluate(observation(**ours), still.new_state, CONFIG)
    assert freed.action == "resume"


# ------------------------------------------------------- rule 3: drain and resume


def test_resume_of_our_own_drain_when_healthy(tmp_path):
    runner = FakeRunner(show=hc.CommandResult(0, show_node("IDLE+DRAIN", reason="gpu_healthcheck: only 3 of 4 GPUs")))
    run_main(tmp_path, runner)
    assert runner.updates == [["/usr/bin/scontrol", "update", f"NodeName={NODE}", "State=RESUME"]]


def test_resume_after_waits_for_enough_healthy_checks():
    drained = observation(node_state="DRAIN", node_reason="gpu_healthcheck: driver did not answer within 5 s")
    decisions = run_checks([drained] * 3, config=hc.Config(resume_after=3))
    assert [d.action for d in decisions] == ["none", "none", "resume"]


def test_our_leak_drain_is_not_resumed_while_a_free_gpu_is_still_full_even_after_state_loss():
    ours = {"node_state": "IDLE+DRAIN", "node_reason": f"gpu_healthcheck: {LEAK}"}
    still_full = observation(used=(1000, 1000, 1000, FULL), **ours)
    decisions = run_checks([still_full, still_full, still_full], state=hc.State(node=NODE))  # state file lost
    assert [d.action for d in decisions] == ["none", "none", "none"]
    assert decisions[0].note == "GPU memory still high; not resumed yet"
    assert decisions[2].note == "already drained with this reason"


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "MIXED+DRAIN", "DOWN+DRAIN", "IDLE+FAIL", "DOWN"])
def test_never_resume_or_redrain_a_node_taken_out_by_someone_else(state):
    admin = {"node_state": state, "node_reason": "bad DIMM, ticket 4711"}
    healthy = hc.evaluate(observation(**admin), hc.State(), CONFIG)
    assert healthy.action == "none"
    failing = hc.evaluate(observation(gpus=(), smi_timed_out=True, **admin), hc.State(), CONFIG)
    assert failing.action == "none"
    assert "bad DIMM" in failing.note


def test_already_drained_with_the_same_reason_makes_no_scontrol_call(tmp_path):
    runner = FakeRunner(
        smi=hc.CommandResult(None, timed_out=True),
        show=hc.CommandResult(0, show_node("IDLE+DRAIN", reason="gpu_healthcheck: driver did not answer within 5 s")),
    )
    run_main(tmp_path, runner)
    run_main(tmp_path, runner)
    assert runner.updates == []


def test_our_drain_with_a_changed_reason_is_updated(tmp_path):
    runner = FakeRunner(
        smi=hc.CommandResult(None, timed_out=True),
        show=hc.CommandResult(0, show_node("IDLE+DRAIN", reason="gpu_healthcheck: only 3 of 4 GPUs visible")),
    )
    run_main(tmp_path, runner)
    assert [u[-1] for u in runner.updates] == ["Reason=gpu_healthcheck: driver did not answer within 5 s"]


def test_a_down_node_with_our_reason_is_drained_again_not_left_alone():
    obs = observation(gpus=(), smi_timed_out=True, node_state="DOWN", node_reason="gpu_healthcheck: x")
    assert hc.evaluate(obs, hc.State(), CONFIG).action == "drain"


def test_drains_even_when_scontrol_show_fails(tmp_path):
    runner = FakeRunner(
        smi=hc.CommandResult(None, timed_out=True),
        show=hc.CommandResult(1, "", "slurm_load_node error: Unable to contact slurm controller"),
    )
    run_main(tmp_path, runner)
    assert len(runner.updates) == 1


def test_healthy_node_with_unknown_slurm_state_does_nothing(tmp_path):
    runner = FakeRunner(show=hc.CommandResult(1, "", "Unable to contact slurm controller"))
    run_main(tmp_path, runner)
    assert runner.updates == []


def test_failed_scontrol_update_is_logged_and_exit_code_stays_0(tmp_path, capsys):
    runner = FakeRunner(smi=hc.CommandResult(None, timed_out=True), update=hc.CommandResult(1, "", "Access denied"))
    run_main(tmp_path, runner)
    assert "scontrol update failed: Access denied" in capsys.readouterr().err


def test_one_log_line_per_decision(tmp_path, capsys):
    run_main(tmp_path, FakeRunner(smi=hc.CommandResult(None, timed_out=True)))
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1
    assert f"node={NODE} action=drain" in lines[0]
    assert 'reason="gpu_healthcheck: driver did not answer within 5 s"' in lines[0]


def test_reason_is_sanitised_to_a_safe_charset_and_length():
    reason = hc.build_reason(['nvidia-smi failed (exit 1): $(reboot) `x` "q" \\ [a@b]\nsecond line' + "x" * 400])
    assert reason.startswith("gpu_healthcheck: nvidia-smi failed (exit 1): (reboot) x q a@b second line")
    assert len(reason) == hc.MAX_REASON_LENGTH
    assert reason.endswith("...")
    assert not set(reason) & set('$`"\\[]\n{}!&|')


def test_odd_node_name_is_refused_without_running_anything(tmp_path):
    runner = FakeRunner()
    assert hc.main(["--node", "n1 State=RESUME", "--no-syslog", "--state-file", str(tmp_path / "s")], runner) == 0
    assert runner.calls == []


# ------------------------------------------------------------------- state file


def test_state_file_round_trip(tmp_path):
    path = str(tmp_path / "sub" / "state.json")
    state = hc.State(high={"GPU-3": 2, "GPU-1": 1}, healthy_streak=0, node=NODE)
    hc.save_state(path, state)
    assert hc.load_state(path, NODE) == state
    assert json.loads(Path(path).read_text())["version"] == hc.STATE_VERSION
    assert [p.name for p in Path(path).parent.iterdir()] == ["state.json"]  # no temp file left


@pytest.mark.parametrize(
    "content",
    [
        "{not json",
        "",
        "[]",
        '{"version": 99, "high": {"GPU-3": 2}}',
        '{"version": 1, "high": "nope", "healthy_streak": -4}',
        "\x00\xff",
    ],
)
def test_corrupted_state_file_is_tolerated(tmp_path, content):
    path = tmp_path / "state.json"
    path.write_text(content, encoding="latin-1")
    state = hc.load_state(str(path), NODE)
    assert (state.high, state.healthy_streak) == ({}, 0)
    runner = FakeRunner(smi=hc.CommandResult(0, smi_csv(used=(1000, 1000, 1000, FULL))))
    run_main(tmp_path, runner)
    assert hc.load_state(str(path), NODE).high == {"GPU-00000003-aaaa-bbbb-cccc-000000000000": 1}


def test_state_file_of_another_node_is_ignored(tmp_path):
    path = str(tmp_path / "state.json")
    hc.save_state(path, hc.State(high={"GPU-3": 2}, node="gpu-4090-01"))
    assert hc.load_state(path, NODE).high == {}


def test_missing_state_file_starts_fresh(tmp_path):
    assert hc.load_state(str(tmp_path / "nope.json"), NODE) == hc.State(node=NODE)


def test_three_runs_of_main_drain_a_leak_through_the_state_file(tmp_path):
    runner = FakeRunner(smi=hc.CommandResult(0, smi_csv(used=(1000, 1000, 1000, FULL))))
    for _ in range(2):
        run_main(tmp_path, runner)
    assert runner.updates == []
    run_main(tmp_path, runner)
    assert runner.updates[-1][-1] == f"Reason=gpu_healthcheck: {LEAK}"


def test_dry_run_changes_nothing(tmp_path, capsys):
    runner = FakeRunner(smi=hc.CommandResult(None, timed_out=True))
    run_main(tmp_path, runner, "--dry-run")
    assert runner.updates == []
    assert not (tmp_path / "state.json").exists()
    printed = json.loads(capsys.readouterr().out)
    assert printed["action"] == "drain"
    assert printed["command"][-1] == "Reason=gpu_healthcheck: driver did not answer within 5 s"


# ---------------------------------------------------------------------- parsers


def test_parse_captured_scontrol_output():
    fields = hc.parse_scontrol_node(SHOW_NODE_DRAINED)
    assert fields["State"] == "MIXED+DRAIN"
    assert fields["Reason"] == f"gpu_healthcheck: {LEAK}"
    assert hc.gpu_count_from_gres(fields["Gres"]) == 4
    assert hc.allocated_from_gres_used(fields["GresUsed"]) == frozenset({0, 1, 2})
    assert fields["OS"].startswith("Linux")


def test_a_comment_cannot_fake_a_reason():
    fields = hc.parse_scontrol_node(show_node() + "   Comment=State=IDLE+DRAIN Reason=gpu_healthcheck: x\n")
    assert (fields["State"], fields.get("Reason")) == ("IDLE", None)


@pytest.mark.parametrize(
    ("gres", "count"),
    [
        ("gpu:a100:4,shard:a100:40", 4),
        ("gpu:4", 4),
        ("gpu", 1),
        ("gpu:a100:2(S:0-1),gpu:v100:2(S:0,1)", 4),
        ("shard:40", None),
        ("(null)", None),
    ],
)
def test_gpu_count_from_gres(gres, count):
    assert hc.gpu_count_from_gres(gres) == count


@pytest.mark.parametrize(
    ("used", "held"),
    [
        ("gpu:a100:0(IDX:N/A),shard:a100:0(0/10,0/10,0/10,0/10)", frozenset()),
        ("gpu:a100:3(IDX:0,2-3)", frozenset({0, 2, 3})),
        ("gpu:a100:1(IDX:0),gpu:v100:1(IDX:2)", frozenset({0, 2})),
        ("gpu:h100:0(IDX:N/A),mps:h100:50(0/100,50/100)", frozenset({1})),
        ("gpu:a100:2", None),  # no IDX: cannot tell which
        ("shard:a100:3", None),
    ],
)
def test_allocated_from_gres_used(used, held):
    assert hc.allocated_from_gres_used(used) == held


def test_parse_nvidia_smi_tolerates_not_available_fields():
    text = "0, GPU-aaa, 0, 1024, 40960\n1, [N/A], [N/A], [N/A], [Not Supported]\n\n"
    first, second = hc.parse_nvidia_smi(text)
    assert (first.index, first.minor, first.fraction) == (0, 0, 1024 / 40960)
    assert (second.key, second.minor, second.fraction) == ("index-1", None, None)


@pytest.mark.parametrize("state", ["IDLE+DRAIN", "DRAINED", "DRAINING", "MIXED+DRAIN+NOT_RESPONDING", "DOWN+DRAIN"])
def test_drain_states(state):
    assert hc.is_drained(state)


@pytest.mark.parametrize("state", ["IDLE", "MIXED", "ALLOCATED+COMPLETING", "DOWN+NOT_RESPONDING", ""])
def test_not_drain_states(state):
    assert not hc.is_drained(state)


# ----------------------------------------------------------- subprocess and e2e


def write_executable(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def test_run_command_kills_the_whole_process_group_on_timeout(tmp_path):
    # The shell's child `sleep` holds the pipes: killing only the shell would still wait 10 s.
    slow = write_executable(tmp_path / "slow", "sleep 10\necho never\n")
    started = time.monotonic()
    result = hc.run_command([str(slow)], 0.5)
    assert result.timed_out
    assert time.monotonic() - started < 3


def test_run_command_reports_exit_code_and_output(tmp_path):
    fails = write_executable(tmp_path / "fails", "echo out; echo err >&2; exit 9\n")
    assert hc.run_command([str(fails)], 5) == hc.CommandResult(9, "out\n", "err\n")


@pytest.fixture
def fake_cluster(tmp_path):
    """Fake nvidia-smi and scontrol; scontrol records every `update` in updates.log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "show.txt").write_text(show_node())
    (tmp_path / "smi.txt").write_text(smi_csv())
    scontrol = write_executable(
        bin_dir / "scontrol",
        f'if [ "$1" = update ]; then printf "%s|" "$@" >> "{tmp_path}/updates.log"; echo >> "{tmp_path}/updates.log"; '
        f'exit 0; fi\ncat "{tmp_path}/show.txt"\n',
    )
    smi = write_executable(bin_dir / "nvidia-smi", f'cat "{tmp_path}/smi.txt"\n')

    def run(*extra, smi_path=smi, env_node=NODE):
        env = {"PATH": "/usr/bin:/bin", "SLURMD_NODENAME": env_node}
        # -I -S: no site-packages, so the script is proven to need the standard library only
        argv = [sys.executable, "-I", "-S", str(SCRIPT), "--scontrol", str(scontrol), "--nvidia-smi", str(smi_path)]
        argv += ["--state-file", str(tmp_path / "state" / "state.json"), *extra]
        started = time.monotonic()
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=60, check=False)
        proc.elapsed = time.monotonic() - started
        return proc

    run.tmp = tmp_path
    run.bin = bin_dir
    return run


def test_end_to_end_dry_run_with_a_hanging_driver(fake_cluster):
    hanging = write_executable(fake_cluster.bin / "nvidia-smi-hangs", "sleep 10\n")
    proc = fake_cluster("--dry-run", "--timeout", "1", smi_path=hanging)
    assert proc.returncode == 0
    assert proc.elapsed < 5, "the real timeout must cut the 10 s hang short"
    decision = json.loads(proc.stdout)
    assert decision["action"] == "drain"
    assert decision["reason"] == "gpu_healthcheck: driver did not answer within 1 s"
    assert decision["command"][1:] == [
        "update",
        f"NodeName={NODE}",
        "State=DRAIN",
        "Reason=gpu_healthcheck: driver did not answer within 1 s",
    ]
    assert f"node={NODE} action=drain" in proc.stderr
    assert not (fake_cluster.tmp / "updates.log").exists()
    assert not (fake_cluster.tmp / "state").exists()


def test_end_to_end_dry_run_healthy_node(fake_cluster):
    proc = fake_cluster("--dry-run")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["action"] == "none"


def test_end_to_end_drains_a_leak_and_resumes_it(fake_cluster):
    (fake_cluster.tmp / "smi.txt").write_text(smi_csv(used=(1000, 1000, 1000, FULL)))
    for _ in range(3):
        assert fake_cluster("--no-syslog").returncode == 0
    log = (fake_cluster.tmp / "updates.log").read_text().splitlines()
    assert log == [f"update|NodeName={NODE}|State=DRAIN|Reason=gpu_healthcheck: {LEAK}|"]
    state = json.loads((fake_cluster.tmp / "state" / "state.json").read_text())
    assert state["high"] == {"GPU-00000003-aaaa-bbbb-cccc-000000000000": 3}

    (fake_cluster.tmp / "show.txt").write_text(show_node("IDLE+DRAIN", reason=f"gpu_healthcheck: {LEAK}"))
    (fake_cluster.tmp / "smi.txt").write_text(smi_csv())
    assert fake_cluster("--no-syslog").returncode == 0
    log = (fake_cluster.tmp / "updates.log").read_text().splitlines()
    assert log[-1] == f"update|NodeName={NODE}|State=RESUME|"


def test_end_to_end_missing_nvidia_smi_binary(fake_cluster):
    proc = fake_cluster("--dry-run", smi_path=fake_cluster.tmp / "absent" / "nvidia-smi")
    assert proc.returncode == 0
    assert json.loads(proc.stdout)["reason"].startswith("gpu_healthcheck: nvidia-smi not found")


def test_script_is_executable_and_never_uses_a_shell():
    assert os.access(SCRIPT, os.X_OK)
    assert SCRIPT.read_text().startswith("#!/usr/bin/env python3\n")
    assert "shell=True" not in SCRIPT.read_text()
