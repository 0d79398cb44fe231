"""The log analyser: each rule on a realistic log, precedence, state-only findings and robustness.

Pure functions: no database, no cluster.
"""

import dataclasses
import random
import re
import time
from pathlib import Path

import pytest

from jobs.diagnosis.diagnose import EVIDENCE_MAX, MAX_SCAN_CHARS, RULES, Finding, diagnose
from jobs.diagnosis.evaluate import read_samples

LOGS = Path(__file__).parent / "logs"

# (log sample, the rule that must come first, text of the line that must be the evidence, diagnose() keywords)
SAMPLES = [
    # The pool's own container runtime (jobs/diagnosis/container_rules.py), as the dev cluster's pyxis wrote them.
    ("image-not-on-node.log", "image-not-on-node", "is not prewarmed on this node", {}),
    ("container-mount-source.log", "container-mount-source", "source path does not exist", {}),
    ("cuda-oom.log", "cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate", {}),
    ("cuda-oom-tensorflow.log", "cuda-oom", "RESOURCE_EXHAUSTED: OOM when allocating tensor", {}),
    ("cublas-cudnn-alloc.log", "cublas-cudnn-alloc", "CUBLAS_STATUS_ALLOC_FAILED", {}),
    ("driver-mismatch.log", "driver-mismatch", "couldn't communicate with the NVIDIA driver", {}),
    ("driver-mismatch-forward-compat.log", "driver-mismatch", "built for NVIDIA Driver Release 550.54", {}),
    ("unsupported-gpu-arch.log", "unsupported-gpu-arch", "CUDA capability sm_90 is not compatible", {}),
    ("no-gpu.log", "no-gpu", "RuntimeError: No CUDA GPUs are available", {}),
    ("image-import.log", "image-import", "returned error code: 404 Not Found", {}),
    ("image-import-401.log", "image-import", "returned error code: 401 Unauthorized", {}),
    ("container-mount.log", "container-mount", "enroot-mount: failed to mount: /mnt/nvme/u1042/imagenette", {}),
    ("missing-shared-lib.log", "missing-shared-lib", "ImportError: libcudart.so.11.0", {}),
    ("module-not-found.log", "module-not-found", "ModuleNotFoundError: No module named 'cv2'", {}),
    ("device-assert.log", "device-assert", "RuntimeError: CUDA error: device-side assert triggered", {}),
    ("xid.log", "xid", "NVRM: Xid (PCI:0000:3b:00): 79", {}),
    ("illegal-memory-access.log", "illegal-memory-access", "RuntimeError: CUDA error: an illegal memory access", {}),
    ("shm-exhausted.log", "shm-exhausted", "insufficient shared memory (shm)", {}),
    ("disk-full.log", "disk-full", "OSError: [Errno 28] No space left on device", {}),
    ("data-permission.log", "data-permission", "Permission denied: '/data/shared/runs/exp42'", {}),
    ("dist-port-in-use.log", "dist-port-in-use", "failed to bind to [::]:29500 (errno: 98", {}),
    ("host-oom.log", "host-oom", "Detected 1 oom_kill event in StepId=48232.batch", {"exit_code": 137}),
    ("node-fail.log", "node-fail", "DUE TO NODE FAILURE", {"state": "NODE_FAIL"}),
    ("preempted.log", "preempted", "DUE TO PREEMPTION", {"state": "PREEMPTED"}),
    ("time-limit.log", "time-limit", "*** JOB 48231 ON gpu-node04 CANCELLED AT", {"state": "TIMEOUT"}),
    ("segfault.log", "segfault", "Fatal Python error: Segmentation fault", {"exit_code": 139}),
    ("nccl.log", "nccl", "[Rank 2] Watchdog caught collective operation timeout", {}),
    ("killed.log", "killed", "line 12:  3971 Killed", {"exit_code": 137}),
    # Loss or gradients turning NaN/Inf: PyTorch 1.13 and 2.3, Lightning 1.x, apex, DeepSpeed, DeiT, Keras 2.15.
    ("nan-anomaly.log", "nan-loss", "RuntimeError: Function 'LogSoftmaxBackward0' returned nan", {}),
    ("nan-clip-grad.log", "nan-loss", "RuntimeError: The total norm of order 2.0 for gradients", {}),
    ("nan-lightning.log", "nan-loss", "ValueError: The loss returned in `training_step` is tensor(nan", {}),
    ("nan-apex-overflow.log", "nan-loss", "reducing loss scale to 1.0", {"state": "TIMEOUT"}),
    ("nan-deepspeed.log", "nan-loss", "Exception: Current loss scale already at minimum", {}),
    ("nan-deit.log", "nan-loss", "Loss is nan, stopping training", {}),
    ("nan-keras.log", "nan-loss", "Batch 212: Invalid loss, terminating training", {}),
    # Permission denied and read-only file systems outside /data.
    ("permission-checkpoint.log", "permission-denied", "Permission denied: '/workspace/checkpoints'", {}),
    ("permission-hf-cache.log", "permission-denied", "Permission denied: '/root/.cache/huggingface", {}),
    ("permission-readonly.log", "permission-denied", "OSError: [Errno 30] Read-only file system: '/workspace", {}),
    ("permission-pip.log", "permission-denied", "ERROR: Could not install packages due to an OSError", {}),
    ("permission-shell.log", "permission-denied", "mkdir: cannot create directory", {}),
    # GPUs present but unusable: CUDA 10 and 12 wordings, set_device failures.
    ("gpu-busy.log", "gpu-unavailable", "[rank1]: RuntimeError: CUDA error: CUDA-capable device(s)", {}),
    ("gpu-busy-old.log", "gpu-unavailable", "THCudaCheck FAIL", {}),
    ("gpu-invalid-ordinal.log", "mig-unsupported", "RuntimeError: CUDA error: invalid device ordinal", {}),
    ("gpu-unknown-error.log", "gpu-unavailable", "CUDA unknown error - this may be due to", {}),
    # Containers that were imported but did not start.
    ("container-start-nsenter.log", "container-start", "enroot-nsenter: failed to create user namespace", {}),
    ("container-start-nvidia-hook.log", "container-start", "nvidia-container-cli: initialization error", {}),
    ("container-start-bash.log", "container-start", "enroot-switchroot: failed to execute", {}),
    # NCCL socket failures: NCCL 2.10, 2.18 and 2.21.
    ("nccl-connect-refused.log", "nccl", "NCCL WARN Net : Connect to 10.20.0.12<43521> failed", {}),
    ("nccl-peer-closed.log", "nccl", "NCCL WARN socketProgress: Connection closed by remote peer", {}),
    ("nccl-network-timeout.log", "nccl", "NCCL WARN socketPollConnect: connect to 192.168.40.11", {}),
    # Preemption by requeue: Slurm 17 and 24, Lightning 1.x and 2.x, submitit.
    ("preempted-requeue.log", "preempted", "*** STEP 48420.0 ON gpu-4090-02 CANCELLED AT", {}),
    ("preempted-requeue-old.log", "preempted", "CANCELLED AT 2018-11-05T10:35:06 DUE TO JOB REQUEUE", {}),
    ("preempted-lightning.log", "preempted", "Handling auto-requeue signal: 10", {}),
    ("preempted-lightning-old.log", "preempted", "requeing job 48440...", {}),
    ("preempted-submitit.log", "preempted", "this job is preempted", {}),
    ("time-limit-submitit.log", "time-limit", "this job is timed-out", {}),
]
# Successful runs full of warnings, NaN in column names, NCCL INFO lines, a couple of AMP skipped steps.
BENIGN_LOGS = ["clean-training.log", "benign-amp-warnings.log", "benign-ddp-requeue-setup.log"]


def read_log(name: str) -> str:
    return (LOGS / name).read_text(encoding="utf-8")


def first_line_with(text: str, needle: str) -> tuple[int, str]:
    for number, line in enumerate(text.split("\n"), start=1):
        if needle in line:
            return number, line
    raise AssertionError(f"no line contains {needle!r}")


def ids(findings: list[Finding]) -> list[str]:
    return [f.rule_id for f in findings]


# --- each rule on a realistic log -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log_name", "rule_id", "evidence_needle", "kwargs"), SAMPLES, ids=[s[0].removesuffix(".log") for s in SAMPLES]
)
def test_log_sample_gives_its_rule_first_with_the_right_line(log_name, rule_id, evidence_needle, kwargs):
    text = read_log(log_name)
    findings = diagnose(text, **kwargs)
    assert findings, f"nothing found in {log_name}"
    first = findings[0]
    assert first.rule_id == rule_id, ids(findings)
    line_number, line = first_line_with(text, evidence_needle)
    assert first.line_number == line_number
    if len(line.strip()) <= EVIDENCE_MAX:
        assert first.evidence == line.strip()
    else:
        assert len(first.evidence) == EVIDENCE_MAX
        assert first.evidence in line


def test_every_rule_has_a_log_sample():
    # The families added from public trackers have their cited samples in logs/real/ (test_diagnosis_families).
    real = {sample.expect for sample in read_samples()}
    assert {rule.rule_id for rule in RULES} - {"python-exception"} <= {s[1] for s in SAMPLES} | real


def test_log_samples_are_realistic_sizes():
    for path in sorted(LOGS.glob("*.log")):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert 10 <= len(lines) <= 60, path.name


@pytest.mark.parametrize(("log_name", "rule_id", "evidence_needle", "kwargs"), SAMPLES)
def test_log_samples_are_found_from_the_log_alone(log_name, rule_id, evidence_needle, kwargs):
    """The state and exit code only help: every sample is recognised without them."""
    assert diagnose(read_log(log_name))[0].rule_id == rule_id


@pytest.mark.parametrize("log_name", BENIGN_LOGS)
def test_a_clean_training_log_gives_no_findings(log_name):
    text = read_log(log_name)
    assert diagnose(text) == []
    assert diagnose(text, state="COMPLETED", exit_code=0) == []


def test_every_log_sample_is_used():
    """A sample file that no test reads would look covered and test nothing."""
    used = {s[0] for s in SAMPLES} | set(BENIGN_LOGS) | {"oom-then-nccl.log"}
    assert {path.name for path in LOGS.glob("*.log")} == used


# --- precedence -------------------------------------------------------------------------------------------------


def test_oom_that_causes_an_nccl_timeout_lists_the_oom_first():
    findings = diagnose(read_log("oom-then-nccl.log"), state="FAILED", exit_code=1)
    assert ids(findings) == ["cuda-oom", "nccl"]
    assert "Tried to allocate 3.91 GiB" in findings[0].evidence


def test_oom_first_even_when_the_nccl_error_comes_earlier_in_the_log():
    text = "[rank0] NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error\nRuntimeError: CUDA out of memory.\n"
    assert ids(diagnose(text)) == ["cuda-oom", "nccl"]


def test_hardware_xid_comes_before_the_cuda_and_nccl_errors_it_caused():
    assert ids(diagnose(read_log("xid.log"))) == ["xid", "illegal-memory-access", "nccl"]


def test_driver_mismatch_comes_before_the_no_gpu_error_it_caused():
    assert ids(diagnose(read_log("driver-mismatch-forward-compat.log"))) == ["driver-mismatch", "no-gpu"]


def test_host_oom_explains_the_shell_killed_line():
    """The shell's "Killed" is the OOM kill itself: reported once, as host OOM."""
    assert ids(diagnose(read_log("host-oom.log"), exit_code=137)) == ["host-oom"]
    assert ids(diagnose(read_log("killed.log"), state="OUT_OF_MEMORY", exit_code=137)) == ["host-oom"]


def test_log_evidence_wins_over_the_state():
    finding = diagnose(read_log("time-limit.log"), state="TIMEOUT")[0]
    assert finding.line_number > 0
    assert "DUE TO TIME LIMIT" in finding.evidence


# --- findings from the state or exit code alone -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "rule_id"),
    [
        ("TIMEOUT", "time-limit"),
        ("DEADLINE", "time-limit"),
        ("OUT_OF_MEMORY", "host-oom"),
        ("NODE_FAIL", "node-fail"),
        ("BOOT_FAIL", "node-fail"),
        ("PREEMPTED", "preempted"),
        ("timeout", "time-limit"),
        (" TIMEOUT ", "time-limit"),
    ],
)
def test_state_alone_gives_a_finding(state, rule_id):
    findings = diagnose("", state=state)
    assert ids(findings) == [rule_id]
    assert findings[0].line_number == 0
    assert state.strip().upper() in findings[0].evidence


@pytest.mark.parametrize("state", ["COMPLETED", "FAILED", "CANCELLED by 1042", "RUNNING", "", None, "???"])
def test_other_states_alone_give_nothing(state):
    assert diagnose("", state=state) == []


def test_time_limit_state_on_a_log_that_says_nothing_about_it():
    text = "\n".join(f"epoch {i} loss {1 / (i + 1):.4f}" for i in range(40))
    findings = diagnose(text, state="TIMEOUT", exit_code=0)
    assert ids(findings) == ["time-limit"]
    assert "raise the time limit" in findings[0].fix.lower()


def test_exit_code_137_alone_says_killed_and_139_says_segfault():
    assert ids(diagnose("", exit_code=137)) == ["killed"]
    assert ids(diagnose("", exit_code=139)) == ["segfault"]
    assert diagnose("", exit_code=1) == []


def test_a_killed_line_does_not_count_with_an_unrelated_exit_code():
    assert "killed" not in ids(diagnose(read_log("killed.log"), exit_code=2))
    assert ids(diagnose(read_log("killed.log"))) == ["killed"]  # exit code unknown


# --- cause and fix tailored to what matched ---------------------------------------------------------------------


def test_missing_module_fix_names_the_module_and_the_pip_package():
    finding = diagnose(read_log("module-not-found.log"))[0]
    assert "`cv2`" in finding.cause
    assert "pip install opencv-python-headless" in finding.fix
    assert "image" in finding.fix
    finding = diagnose("ModuleNotFoundError: No module named 'einops.layers'")[0]
    assert "einops.layers" in finding.cause
    assert "pip install einops" in finding.fix


@pytest.mark.parametrize("code", [13, 31, 43, 48, 63, 64, 74, 79, 94, 95])
def test_known_xid_codes_are_explained(code):
    line = f"[Tue May 14 10:00:00 2024] NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, name=python, Ch 00000010"
    finding = diagnose(line)[0]
    assert finding.rule_id == "xid"
    assert f"Xid {code}" in finding.cause
    if code in (13, 31, 43):
        assert "CUDA_LAUNCH_BLOCKING" in finding.fix
    else:
        assert "node name" in finding.fix


def test_unknown_xid_code_gets_the_general_explanation():
    finding = diagnose("NVRM: Xid (PCI:0000:b1:00): 999, pid=1, name=python")[0]
    assert finding.rule_id == "xid"
    assert finding.cause == next(r.cause for r in RULES if r.rule_id == "xid")


def test_image_import_explains_401_and_404_differently():
    not_found = diagnose(read_log("image-import.log"))[0]
    assert "404" in not_found.cause
    assert "tag" in not_found.fix
    unauthorised = diagnose(read_log("image-import-401.log"))[0]
    assert "nvcr.io#nvidia/pytorch" in unauthorised.fix
    private = diagnose("pyxis:     [ERROR] URL https://ghcr.io/token returned error code: 401 Unauthorized")[0]
    assert "private" in private.cause
    assert "never `latest`" in private.fix


@pytest.mark.parametrize(
    "line",
    [
        "slurmstepd: error: pyxis: failed to import docker image",
        "slurmstepd: error: pyxis:     [ERROR] Could not process JSON input: manifest unknown",
        "slurmstepd: error: pyxis:     [ERROR] No such file or directory: /home/u1042/images/pytorch.sqsh",
        "slurmstepd: error: pyxis:     enroot-aufs2ovlfs: failed to open /tmp/x: No such file or directory",
    ],
)
def test_other_image_import_messages(line):
    assert ids(diagnose(line)) == ["image-import"]


@pytest.mark.parametrize(
    "line",
    [
        "RuntimeError: CUDA driver version is insufficient for CUDA runtime version",
        "RuntimeError: The NVIDIA driver on your system is too old (found version 11040).",
        "Failed to initialize NVML: Driver/library version mismatch",
        "W0514 cuda_driver.cc:268] failed call to cuInit: CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
    ],
)
def test_other_driver_mismatch_messages(line):
    finding = diagnose(line)[0]
    assert finding.rule_id == "driver-mismatch"
    assert "image" in finding.fix


def test_driver_fix_depends_on_the_message():
    newer = diagnose("cudaGetDeviceCount returned 35\n-> CUDA driver version is insufficient for CUDA runtime version")
    assert "newer than" in newer[0].cause
    assert newer[0].line_number == 2
    unreachable = diagnose(read_log("driver-mismatch.log"))[0]
    assert "GPU type and count" in unreachable.fix


@pytest.mark.parametrize(
    ("line", "rule_id"),
    [
        ("tensorflow.python.framework.errors_impl.ResourceExhaustedError: Graph execution error:", "cuda-oom"),
        ("RuntimeError: CUDA error: out of memory", "cuda-oom"),
        (
            "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate",
            "cuda-oom",
        ),
        ("E external/xla/stream_executor: failed to alloc 8589934592 bytes: CUDA_ERROR_OUT_OF_MEMORY", "cuda-oom"),
        ("RuntimeError: cuDNN error: CUDNN_STATUS_NOT_INITIALIZED", "cublas-cudnn-alloc"),
        ("Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR", "cublas-cudnn-alloc"),
        ("RuntimeError: CUDA error: no CUDA-capable device is detected", "no-gpu"),
        ("AssertionError: Torch not compiled with CUDA enabled", "no-gpu"),
        ("torch.cuda.is_available() = False", "no-gpu"),
        (
            "python: error while loading shared libraries: libpython3.10.so.1.0: cannot open shared object file",
            "missing-shared-lib",
        ),
        ("OSError: /opt/conda/lib/libcudnn.so.8: cannot open shared object file: No such file", "missing-shared-lib"),
        ("RuntimeError: CUDA error: misaligned address", "illegal-memory-access"),
        ("cp: cannot create regular file '/data/results/out.csv': Permission denied", "data-permission"),
        ("bash: /data/run.sh: Permission denied", "data-permission"),
        ("OSError: [Errno 30] Read-only file system: '/data/ro/model.pt'", "data-permission"),
        ("OSError: [Errno 122] Disk quota exceeded", "disk-full"),
        ("RuntimeError: unable to write to file </torch_4211_2894_0>: No space left on device (28)", "shm-exhausted"),
        ("RuntimeError: DataLoader worker (pid 311) is killed by signal: Segmentation fault.", "segfault"),
        ("Signal 11 (SIGSEGV) received by PID 4410", "segfault"),
        ("srun: error: gpu-node02: task 0: Out Of Memory", "host-oom"),
        ("slurmstepd: error: Detected 2 oom-kill event(s) in step 48232.0 cgroup.", "host-oom"),
        ("gpu-node02:1:9 [0] NCCL WARN Net : Connection to 10.0.0.3 timed out", "nccl"),
        ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited", "nccl"),
        ("ncclSystemError: System call (e.g. socket, malloc) or external library call failed", "nccl"),
        ("RuntimeError: CUDA error: no kernel image is available for execution on the device", "unsupported-gpu-arch"),
        ("srun: error: gpu-node01: task 0: Killed", "killed"),
        ("Killed", "killed"),
    ],
)
def test_variants_of_each_message(line, rule_id):
    text = f"epoch 1 loss 0.5\n{line}\nsrun: error: gpu-node01: task 0: Exited with exit code 1\n"
    finding = diagnose(text)[0]
    assert finding.rule_id == rule_id
    assert finding.line_number == 2
    assert finding.evidence == line.strip()


@pytest.mark.parametrize(
    "line",
    [
        "Permission denied: '/home/u1042/.netrc'",  # not the data mount
        "gpu-node01:5120:5120 [0] NCCL INFO NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file",
        "torch.cuda.is_available(): True",
        "Killed 3 stale worker processes",
        "[INFO] Free GPU memory: 38.2 GiB, no out of memory risk",
        "NCCL INFO NCCL_IB_TIMEOUT set by environment to 22",
        "metric/oom_events=0 metric/xid_count=0",
    ],
)
def test_harmless_lines_give_nothing(line):
    assert diagnose(line) == []


def test_disk_full_on_the_data_mount_suggests_a_larger_nvme_cache():
    finding = diagnose("OSError: [Errno 28] No space left on device: '/data/ckpt/step_900.pt'")[0]
    assert "/data" in finding.cause
    assert "NVMe cache (GB)" in finding.fix
    elsewhere = diagnose(read_log("disk-full.log"))[0]
    assert "HF_HOME=/data" in elsewhere.fix


def test_fixes_name_the_portal_knobs():
    by_id = {f.rule_id: f for name, *_ in SAMPLES for f in diagnose(read_log(name))}
    assert "a100 40 GB, h100 80 GB" in by_id["cuda-oom"].fix
    assert "GPU memory (GB)" in by_id["cuda-oom"].fix
    assert "time limit" in by_id["time-limit"].fix
    assert "Image field" in by_id["image-import"].fix
    assert "data mount" in by_id["data-permission"].fix
    assert "GPU type and count" in by_id["no-gpu"].fix
    assert "requeue" in by_id["node-fail"].fix


# --- robustness -------------------------------------------------------------------------------------------------


def test_empty_and_whitespace_text():
    assert diagnose("") == []
    assert diagnose("\n\n   \r\n\t") == []


def test_binary_junk_decoded_with_replacement():
    junk = random.Random(11).randbytes(300_000).decode("utf-8", errors="replace")
    findings = diagnose(junk)
    assert isinstance(findings, list)
    assert diagnose(junk + "\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")[0].rule_id == "cuda-oom"


def test_bytes_and_non_text_do_not_raise():
    assert diagnose(b"\xff\xfeRuntimeError: CUDA out of memory.\x00")[0].rule_id == "cuda-oom"  # type: ignore[arg-type]
    assert diagnose(None) == []  # type: ignore[arg-type]
    assert diagnose("", state=42, exit_code="137") == []  # type: ignore[arg-type]


def test_evidence_has_no_control_characters():
    finding = diagnose("\x1b[31mRuntimeError: CUDA out of memory.\x1b[0m\x00\x07")[0]
    assert finding.evidence.isprintable()
    assert "CUDA out of memory" in finding.evidence


def test_windows_line_endings():
    text = "epoch 1\r\nepoch 2\r\nModuleNotFoundError: No module named 'timm'\r\n"
    finding = diagnose(text)[0]
    assert (finding.line_number, finding.evidence) == (3, "ModuleNotFoundError: No module named 'timm'")


def test_progress_bar_line_rewritten_with_carriage_returns_keeps_only_the_matching_segment():
    bar = "\r".join(f"Epoch 3: {i:3d}%|{'#' * (i // 10):10s}| {i * 50}/5000" for i in range(0, 100, 2))
    text = "start\n" + bar + "\rRuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB\r" + bar + "\nend\n"
    finding = diagnose(text)[0]
    assert finding.line_number == 2
    assert finding.evidence == "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB"


def test_evidence_of_a_long_line_is_a_window_around_the_match():
    text = "x" * 10_000 + " RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB " + "y" * 10_000
    finding = diagnose(text)[0]
    assert len(finding.evidence) <= EVIDENCE_MAX
    assert "CUDA out of memory" in finding.evidence
    assert finding.line_number == 1


@pytest.mark.parametrize(
    "line",
    [
        "a" * 5_000_000,
        " " * 5_000_000,
        "/data/x " * 700_000,
        "NCCL WARN " * 500_000,
        "enroot-x: " * 500_000,
        "line 1: 2 " * 500_000,
        "Xid (PCI:" * 600_000,
        "[ERROR] URL " + "h" * 5_000_000,
        "ModuleNotFoundError: No module named '" + "m" * 5_000_000,
        "torch.cuda.is_available() " * 200_000,
    ],
    ids=[
        "letters",
        "spaces",
        "data-paths",
        "nccl-warn",
        "enroot",
        "shell-line",
        "xid",
        "url",
        "module",
        "is-available",
    ],
)
def test_a_5_mb_single_line_finishes_quickly(line):
    started = time.perf_counter()
    diagnose(line)
    diagnose(line + "\nRuntimeError: CUDA out of memory. Tried to allocate 1 GiB", state="TIMEOUT", exit_code=137)
    # A guard against catastrophic backtracking (minutes or hours on 5 MB), not a speed target
    # (bench/ measures speed): generous, so a loaded 2-core CI machine never trips it.
    assert time.perf_counter() - started < 15.0


def test_a_5_mb_line_with_the_error_at_its_end_is_found():
    text = "Epoch 1: " + "#" * 5_000_000 + " NVRM: Xid (PCI:0000:3b:00): 79, pid=1, GPU has fallen off the bus."
    started = time.perf_counter()
    findings = diagnose(text)
    assert time.perf_counter() - started < 10.0  # backtracking guard, as above
    assert ids(findings) == ["xid"]
    assert len(findings[0].evidence) <= EVIDENCE_MAX
    assert "Xid (PCI:0000:3b:00): 79" in findings[0].evidence


def test_text_longer_than_the_scan_limit_keeps_true_line_numbers():
    filler = "step 1 loss 0.1\n" * (MAX_SCAN_CHARS // 16 + 5000)
    text = filler + "ModuleNotFoundError: No module named 'apex'\n"
    finding = diagnose(text)[0]
    assert finding.rule_id == "module-not-found"
    assert finding.line_number == filler.count("\n") + 1


def test_max_findings_caps_the_list():
    text = "\n".join(
        [
            "RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB",
            "ModuleNotFoundError: No module named 'wandb'",
            "OSError: [Errno 28] No space left on device",
            "Segmentation fault (core dumped)",
            "[rank0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
            "PermissionError: [Errno 13] Permission denied: '/data/x'",
            "RuntimeError: CUDA error: device-side assert triggered",
        ]
    )
    everything = diagnose(text, state="TIMEOUT", max_findings=100)
    assert len(everything) == 8
    assert len(diagnose(text, state="TIMEOUT")) == 5  # the default
    assert diagnose(text, state="TIMEOUT", max_findings=2) == everything[:2]
    assert diagnose(text, max_findings=1) == everything[:1]
    assert diagnose(text, max_findings=0) == []
    assert diagnose(text, max_findings=-3) == []


def test_one_finding_per_rule():
    text = "\n".join(["RuntimeError: CUDA out of memory."] * 50)
    findings = diagnose(text)
    assert ids(findings) == ["cuda-oom"]
    assert findings[0].line_number == 1


# --- the rule table ---------------------------------------------------------------------------------------------


def test_rules_are_complete_and_unique():
    assert len(RULES) >= 12
    rule_ids = [rule.rule_id for rule in RULES]
    assert len(rule_ids) == len(set(rule_ids))
    for rule in RULES:
        assert re.fullmatch(r"[a-z0-9]+(?:-[a-z0-9]+)*", rule.rule_id), rule.rule_id
        assert rule.title.strip() and rule.cause.strip() and rule.fix.strip(), rule.rule_id
        assert rule.patterns, rule.rule_id
        assert all(isinstance(p, re.Pattern) for p in rule.patterns), rule.rule_id
        assert all(isinstance(r.pattern, re.Pattern) and r.count > 1 and r.within_lines >= 1 for r in rule.runs)


def test_required_rules_are_present():
    required = {
        "cuda-oom",
        "driver-mismatch",
        "image-import",
        "nccl",
        "time-limit",
        "host-oom",
        "xid",
        "module-not-found",
        "segfault",
        "data-permission",
        "device-assert",
        "disk-full",
        "illegal-memory-access",
        "no-gpu",
        "cublas-cudnn-alloc",
        "killed",
        "nan-loss",
        "permission-denied",
        "gpu-unavailable",
        "container-start",
        "preempted",
    }
    assert required <= {rule.rule_id for rule in RULES}


POSITIVE_CLASS = re.compile(r"\[(?!\^)(?:\\.|[^\]\\])*\]")
# ".", a negated class or \S, repeated without an upper bound (*, +, {n,})
UNBOUNDED_WILDCARD = re.compile(r"(?:(?<!\\)\.|\[\^(?:\\.|[^\]\\])*\]|\\S)(?:[*+]|\{\d*,\})")


def test_patterns_have_no_unbounded_wildcards():
    """`.*` and kin on a multi-megabyte line is where catastrophic backtracking starts: spans must be bounded."""
    assert UNBOUNDED_WILDCARD.search(POSITIVE_CLASS.sub("C", r"a[\w.+-]{1,8}b")) is None
    assert UNBOUNDED_WILDCARD.search(r"x.*y") and UNBOUNDED_WILDCARD.search(r"x[^\n]+y")
    for rule in RULES:
        for pattern in (*rule.patterns, *(run.pattern for run in rule.runs)):
            assert not UNBOUNDED_WILDCARD.search(POSITIVE_CLASS.sub("C", pattern.pattern)), (rule.rule_id, pattern)


def test_finding_is_frozen():
    finding = diagnose("RuntimeError: CUDA out of memory.")[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        finding.rule_id = "other"  # type: ignore[misc]
