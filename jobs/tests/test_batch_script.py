"""jobs.submission.batch_script: the script has fixed lines whatever the input, and really runs under bash."""

import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st

from jobs.container_starts import parse_container_start
from jobs.submission.batch_script import (
    CONTAINER_WRAPPER,
    HEADER_LINES,
    OUTPUT_MARKER,
    pyxis_image_reference,
    render_batch_script,
)
from jobs.submission.spec import ENV_NAME_RE, GpuRequest, JobSpec, is_reserved_env_name

DIGEST = "sha256:" + "0123456789abcdef" * 4
UUID = "3f1c2d9e-8b7a-4c6d-9e0f-1a2b3c4d5e6f"
RUNTIMES = ("none", "pyxis")
FAKE_SRUN = """#!/bin/bash
# Stands in for srun: records its arguments, drops the options, runs the rest.
printf '%s\\0' "$@" > srun-args
while [ "$#" -gt 0 ] && [ "${1#--}" != "$1" ]; do shift; done
exec "$@"
"""


def make_spec(
    command: str = "true",
    *,
    image: str = "nvcr.io/nvidia/pytorch:24.01-py3",
    environment: dict[str, str] | None = None,
    data_mount: str = "",
) -> JobSpec:
    return JobSpec(
        name="job",
        image=image,
        gpu=GpuRequest("a100", count=1),
        command=command,
        time_limit_minutes=10,
        data_mount=data_mount,
        environment=environment or {},
    )


def run(script: str, directory: Path, *, fake_srun: bool = False, env=None) -> subprocess.CompletedProcess:
    path = os.environ.get("PATH", "/usr/bin:/bin")
    if fake_srun:
        bin_dir = directory / "bin"
        bin_dir.mkdir(exist_ok=True)
        (bin_dir / "srun").write_text(FAKE_SRUN)
        (bin_dir / "srun").chmod(0o755)
        path = f"{bin_dir}:{path}"
    (directory / "job.sh").write_text(script, encoding="utf-8")
    return subprocess.run(
        ["bash", "job.sh"],
        cwd=directory,
        env={"PATH": path, **(env or {})},
        capture_output=True,
        timeout=30,
        check=False,
    )


def job_output(result: subprocess.CompletedProcess) -> bytes:
    """What the user's command printed: everything after the header's last line."""
    marker = (OUTPUT_MARKER + "\n").encode()
    assert marker in result.stdout, result
    return result.stdout.split(marker, 1)[1]


# --- It runs ---------------------------------------------------------------------------


def test_the_command_runs_with_its_environment_as_data(tmp_path):
    spec = make_spec(
        """echo "hello $NAME" && printf '%s\\n' 'it'"'"'s'""",
        environment={"NAME": "world; rm -rf /"},
        data_mount="/mnt/nvme/datasets",
    )
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="none"), tmp_path)
    assert result.returncode == 0, result
    assert job_output(result) == b"hello world; rm -rf /\nit's\n"
    header = result.stdout.decode().split(OUTPUT_MARKER)[0]
    assert UUID in header
    assert "nvcr.io/nvidia/pytorch:24.01-py3" in header
    assert "/mnt/nvme/datasets" in header
    assert "CUDA_VISIBLE_DEVICES" in header


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize("code", [0, 1, 3, 255])
def test_the_exit_code_is_the_commands(tmp_path, runtime, code):
    script = render_batch_script(make_spec(f"exit {code}"), job_uuid=UUID, runtime=runtime)
    assert run(script, tmp_path, fake_srun=True).returncode == code


def test_the_wrappers_strict_mode_does_not_leak_into_the_command(tmp_path):
    spec = make_spec('false; echo "unset: [$UNSET_VARIABLE]"; false | true; echo done')
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="none"), tmp_path)
    assert result.returncode == 0, result
    assert job_output(result) == b"unset: []\ndone\n"


def test_values_survive_exactly_and_only_the_intended_variables_are_exported(tmp_path):
    env = {"A": "x\n\n", "B": "", "C": " $(id) `id` '\"\\ ", "D": "é\u2028\r\x0b"}
    spec = make_spec(
        'printf \'%s\\0\' "$A" "$B" "$C" "$D" "$GPUPOOL_DATA" "$GPUPOOL_JOB_UUID"; env',
        environment=env,
        data_mount="/mnt/nvme/x",
    )
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="none", data_source_root="/srv/root/"), tmp_path)
    assert result.returncode == 0, result
    *values, env_dump = job_output(result).split(b"\0")
    assert [v.decode() for v in values] == [*env.values(), "/srv/root/mnt/nvme/x", UUID]
    assert b"GPUPOOL_COMMAND" not in env_dump and b"GPUPOOL_IMAGE" not in env_dump


def test_without_a_data_mount_gpupool_data_is_unset(tmp_path):
    spec = make_spec('echo "[${GPUPOOL_DATA-unset}]"')
    for runtime in RUNTIMES:
        result = run(render_batch_script(spec, job_uuid=UUID, runtime=runtime), tmp_path, fake_srun=True)
        assert job_output(result) == b"[unset]\n"


def test_pyxis_runs_the_command_in_the_container_once(tmp_path):
    spec = make_spec(
        'echo "in container, data at $GPUPOOL_DATA, $V"',
        image=f"nvcr.io/nvidia/pytorch:24.01-py3@{DIGEST}",
        environment={"V": "v; id"},
        data_mount="/mnt/nvme/imagenet",
    )
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True)
    assert result.returncode == 0, result
    assert job_output(result) == b"in container, data at /data, v; id\n"
    args = (tmp_path / "srun-args").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in args] == [
        "--ntasks=1",
        f"--container-image=nvcr.io#nvidia/pytorch@{DIGEST}",
        f"--container-mounts=/mnt/nvme/imagenet:/data:ro,{tmp_path}:{tmp_path}",
        f"--container-workdir={tmp_path}",
        "bash",
        "-c",
        CONTAINER_WRAPPER,
        "gpupool-job",
        spec.command,
    ]


def test_pyxis_writes_when_the_container_was_launched_and_when_it_started_to_stderr(tmp_path):
    spec = make_spec("sleep 0.3; echo done >&2")
    script = render_batch_script(spec, job_uuid=UUID, runtime="pyxis")
    # The fake srun takes a moment, as pyxis mounting an image does.
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "srun").write_text(FAKE_SRUN.replace('exec "$@"', 'sleep 0.25; exec "$@"'))
    (tmp_path / "bin" / "srun").chmod(0o755)
    (tmp_path / "job.sh").write_text(script)
    result = subprocess.run(
        ["bash", "job.sh"],
        cwd=tmp_path,
        env={"PATH": f"{tmp_path}/bin:/usr/bin:/bin"},
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result
    assert job_output(result) == b""  # the user's output stays theirs
    stderr = result.stderr.decode()
    assert stderr.endswith("done\n")
    seconds = parse_container_start(stderr)
    assert seconds is not None and 0.2 <= seconds < 5, stderr


def test_pyxis_without_data_mount_mounts_only_the_job_directory(tmp_path):
    spec = make_spec('echo "out=$GPUPOOL_OUTPUT"', image="pytorch/pytorch:2.3.0")
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True)
    assert result.returncode == 0, result
    assert job_output(result) == f"out={tmp_path}\n".encode()
    args = (tmp_path / "srun-args").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in args] == [
        "--ntasks=1",
        "--container-image=pytorch/pytorch:2.3.0",
        f"--container-mounts={tmp_path}:{tmp_path}",
        f"--container-workdir={tmp_path}",
        "bash",
        "-c",
        CONTAINER_WRAPPER,
        "gpupool-job",
        spec.command,
    ]


def test_pyxis_mounts_the_portals_read_only_directories_at_their_own_paths(tmp_path):
    # A TensorBoard session's runs (interactive/boards.py): from the submission's environment.
    spec = make_spec("echo ran", image="pytorch/pytorch:2.3.0")
    env = {"GPUPOOL_READ_ONLY_DIRS": "/jobs/alice/run-1:/jobs/alice/sweep-2"}
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True, env=env)
    assert result.returncode == 0, result
    args = [a.decode() for a in (tmp_path / "srun-args").read_bytes().split(b"\0")[:-1]]
    assert (
        f"--container-mounts={tmp_path}:{tmp_path},/jobs/alice/run-1:/jobs/alice/run-1:ro,"
        "/jobs/alice/sweep-2:/jobs/alice/sweep-2:ro"
    ) in args
    assert b"2 directories mounted read-only" in result.stdout


@pytest.mark.parametrize("directories", ["/jobs/a,/etc", "relative", "/jobs/a::/jobs/b"])
def test_pyxis_refuses_read_only_directories_that_pyxis_would_split(tmp_path, directories):
    spec = make_spec("echo ran")
    env = {"GPUPOOL_READ_ONLY_DIRS": directories}
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True, env=env)
    assert result.returncode == 2
    assert b"refusing read-only directory" in result.stderr
    assert not (tmp_path / "srun-args").exists()


@pytest.mark.parametrize("mount", ["/mnt/nvme/a,/etc:/etc", "/mnt/nvme/a:/etc", "relative", "-x"])
def test_pyxis_refuses_mount_sources_that_pyxis_would_split(tmp_path, mount):
    spec = make_spec("echo ran", data_mount=mount)  # the validator refuses these; this is the last line of defence
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True)
    assert result.returncode == 2
    assert b"ran" not in result.stdout
    assert not (tmp_path / "srun-args").exists()


def test_pyxis_refuses_a_job_directory_that_pyxis_would_split(tmp_path):
    directory = tmp_path / "a,b"
    directory.mkdir()
    result = run(render_batch_script(make_spec("echo ran"), job_uuid=UUID, runtime="pyxis"), directory, fake_srun=True)
    assert result.returncode == 2
    assert b"ran" not in result.stdout
    assert not (directory / "srun-args").exists()


@pytest.mark.parametrize(
    "image, expected",
    [
        ("nvcr.io/nvidia/pytorch:24.01-py3", "nvcr.io#nvidia/pytorch:24.01-py3"),
        ("localhost:5000/team/img:v1", "localhost:5000#team/img:v1"),
        ("localhost/img:v1", "localhost#img:v1"),
        ("pytorch/pytorch:2.3.0", "pytorch/pytorch:2.3.0"),
        ("ubuntu:22.04", "ubuntu:22.04"),
        (f"ghcr.io/org/img:1.0@{DIGEST}", f"ghcr.io#org/img@{DIGEST}"),
        (f"ubuntu@{DIGEST}", f"ubuntu@{DIGEST}"),
        ("not an image\n", "not an image\n"),
    ],
)
def test_pyxis_image_reference(image, expected):
    assert pyxis_image_reference(image) == expected


# --- Refusals --------------------------------------------------------------------------


def test_an_unknown_runtime_is_refused():
    with pytest.raises(ValueError):
        render_batch_script(make_spec(), job_uuid=UUID, runtime="docker")


@pytest.mark.parametrize("job_uuid", ["", "a b", "x\n#SBATCH", "'", "-rf", "a" * 65, None])
def test_a_malformed_job_uuid_is_refused(job_uuid):
    with pytest.raises(ValueError):
        render_batch_script(make_spec(), job_uuid=job_uuid, runtime="none")


@pytest.mark.parametrize(
    "name",
    ["", "1A", "A-B", "A B", "A=B", "a[$(id)]", "A\n", "A\nB", "$(id)", "X" * 65, "PATH", "SLURM_JOB_ID", "LD_PRELOAD"],
)
@pytest.mark.parametrize("runtime", RUNTIMES)
def test_invalid_environment_names_are_refused(name, runtime):
    with pytest.raises(ValueError):
        render_batch_script(make_spec(environment={name: "x"}), job_uuid=UUID, runtime=runtime)


@pytest.mark.parametrize(
    "spec",
    [
        make_spec("echo a\x00b"),
        make_spec(environment={"A": "a\x00b"}),
        make_spec(image="ubuntu:1\x00"),
        make_spec(data_mount="/mnt/nvme/\x00"),
        make_spec("echo \ud800"),
    ],
)
def test_text_that_bash_cannot_hold_is_refused(spec):
    with pytest.raises(ValueError):
        render_batch_script(spec, job_uuid=UUID, runtime="none")


def test_a_relative_data_source_root_is_refused():
    with pytest.raises(ValueError):
        render_batch_script(make_spec(data_mount="/mnt/nvme/x"), job_uuid=UUID, runtime="none", data_source_root="x")


# --- Whatever the input, the same lines ----------------------------------------------------

# Everything Python's str.splitlines() splits on, and text that would mean something to Slurm or bash.
LINE_BREAKS = ["\n", "\r", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
TRICKS = ["#SBATCH --gres=gpu:8", "#", "'", '"', "\\", "$(id)", "`id`", ";", "&&", "${IFS}", "'\"'\"'", "EOF"]
hostile_text = st.lists(
    st.one_of(
        st.sampled_from(LINE_BREAKS + TRICKS),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20),
    ),
    max_size=12,
).map("".join)
env_names = st.from_regex(ENV_NAME_RE, fullmatch=True).filter(lambda name: not is_reserved_env_name(name))
_BASE64_LITERAL = re.compile(r"'[A-Za-z0-9+/=]*'")


def skeleton(script: str) -> list[str]:
    """The script with every base64 payload emptied: identical for every input."""
    return [_BASE64_LITERAL.sub("''", line) for line in script.split("\n")]


TRIVIAL = {runtime: render_batch_script(make_spec(), job_uuid=UUID, runtime=runtime) for runtime in RUNTIMES}


@hypothesis_settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    command=hostile_text,
    image=hostile_text,
    data_mount=hostile_text,
    environment=st.dictionaries(env_names, hostile_text, max_size=4),
    data_source_root=st.sampled_from(["", "/", "/srv/root"]),
    runtime=st.sampled_from(RUNTIMES),
)
def test_no_input_adds_or_breaks_a_line(command, image, data_mount, environment, data_source_root, runtime):
    spec = make_spec(command, image=image, environment=environment, data_mount=data_mount)
    script = render_batch_script(spec, job_uuid=UUID, runtime=runtime, data_source_root=data_source_root)
    trivial = TRIVIAL[runtime]
    lines = script.splitlines()
    assert len(lines) == len(trivial.splitlines())
    assert script.count("\n") == trivial.count("\n")
    assert not any(line.startswith("#SBATCH") for line in lines)
    assert "#SBATCH" not in script
    assert [line for line in lines if line.startswith("#")] == list(HEADER_LINES)
    assert lines[: len(HEADER_LINES)] == list(HEADER_LINES)
    assert skeleton(script) == skeleton(trivial)
    assert script.isascii()


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text, value=hostile_text, data_mount=hostile_text)
def test_the_script_prints_exactly_what_it_was_given(tmp_path, text, value, data_mount):
    spec = make_spec(
        'printf \'%s\\0\' "$V" "${GPUPOOL_DATA-}"; printf %s ' + shlex.quote(text),
        environment={"V": value},
        data_mount=data_mount,
    )
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="none"), tmp_path)
    assert result.returncode == 0, result
    expected = f"{value}\0{data_mount}\0{text}".encode()
    assert result.stdout.endswith((OUTPUT_MARKER + "\n").encode() + expected)


@hypothesis_settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=hostile_text, image=hostile_text)
def test_pyxis_passes_image_and_command_as_single_arguments(tmp_path, text, image):
    (tmp_path / "srun-args").unlink(missing_ok=True)
    spec = make_spec("printf %s " + shlex.quote(text), image=image)
    result = run(render_batch_script(spec, job_uuid=UUID, runtime="pyxis"), tmp_path, fake_srun=True)
    assert result.returncode == 0, result
    assert result.stdout.endswith((OUTPUT_MARKER + "\n").encode() + text.encode())
    args = (tmp_path / "srun-args").read_bytes().split(b"\0")[:-1]
    assert [a.decode() for a in args] == [
        "--ntasks=1",
        f"--container-image={pyxis_image_reference(image)}",
        f"--container-mounts={tmp_path}:{tmp_path}",
        f"--container-workdir={tmp_path}",
        "bash",
        "-c",
        CONTAINER_WRAPPER,
        "gpupool-job",
        spec.command,
    ]
