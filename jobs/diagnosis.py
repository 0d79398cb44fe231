"""Recognise common GPU-job failures in a job's log and say the cause and the fix.

`diagnose()` reads the tail of a job's stdout+stderr (plus, when known, the Slurm state and exit code)
and returns findings, most specific first. The rules are data: each `Rule` has compiled patterns in order
of preference (the first pattern that matches anywhere gives the evidence), optional Slurm states or exit
codes that fire it even when the log says nothing, and optionally a function that tailors the cause and
the fix to what matched (the Xid code, the missing module, the HTTP status of a registry...).

The patterns never use `.*`: spans within a line are bounded (`[^\\n]{0,N}`), so a multi-megabyte single
line costs linear time. Line numbers count `\\n`-separated lines from 1; a finding from the state or the
exit code alone has line number 0 and says so in its evidence.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

EVIDENCE_MAX = 300
# The caller passes the tail of the log; this bounds the work whatever it passes.
MAX_SCAN_CHARS = 2 * 1024 * 1024

_GPU_MEMORY_HINT = (
    "request a GPU with more memory (a100 40 GB, h100 80 GB) or set a higher GPU memory (GB) in the job form"
)


@dataclass(frozen=True)
class Finding:
    rule_id: str  # stable slug, e.g. "cuda-oom"
    title: str  # short, e.g. "CUDA out of memory"
    cause: str  # one or two plain sentences for a researcher
    fix: str  # what to do, concrete
    evidence: str  # the matching log line, stripped, at most 300 chars
    line_number: int  # 1-based line in the text given; 0 when the finding comes from the state or exit code alone


# (match, evidence line) -> (cause, fix), or None for the rule's own texts.
Explain = Callable[[re.Match[str], str], tuple[str, str] | None]


@dataclass(frozen=True)
class Rule:
    rule_id: str
    title: str
    cause: str
    fix: str
    patterns: tuple[re.Pattern[str], ...]
    # Slurm states that fire the rule even without log evidence.
    states: frozenset[str] = frozenset()
    # Exit codes that fire the rule even without log evidence.
    exit_codes: frozenset[int] = frozenset()
    # When set and the exit code is known, log evidence counts only with one of these exit codes.
    log_needs_exit_code: frozenset[int] | None = None
    # Skip this rule when one of these has already been found (it explains this one).
    suppressed_by: tuple[str, ...] = ()
    explain: Explain | None = field(default=None, compare=False)


def _re(*patterns: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, flags | re.MULTILINE) for p in patterns)


# --- tailoring functions --------------------------------------------------------------------------------------


def _explain_image_import(m: re.Match[str], line: str) -> tuple[str, str] | None:
    code = m.groupdict().get("code")
    url = m.groupdict().get("url") or ""
    base_fix = (
        "Check the Image field: registry, name and tag (or sha256 digest) must exist exactly as written, "
        "and tags are pinned (never `latest`). The free tier may use only the official PyTorch and TensorFlow images."
    )
    if code == "401" or code == "403":
        if re.search(r"registry-1\.docker\.io/v2/[\w-]+\.[\w.-]+/", url):
            return (
                "The registry refused the image: the registry host was read as part of a Docker Hub repository name, "
                "so Docker Hub was asked for an image it does not have.",
                "In the Image field, write an image of another registry with `#` after the registry host "
                "(e.g. `nvcr.io#nvidia/pytorch:24.01-py3`, not `nvcr.io/nvidia/...`). " + base_fix,
            )
        return (
            f"The registry answered {code}: the image is private, or its name is misspelled "
            "(Docker Hub answers 401 for repositories that do not exist).",
            "Check the spelling of the image name; for a private image ask the admins to add registry credentials "
            "for the cluster, or use a public official image. " + base_fix,
        )
    if code == "404":
        return (
            "The registry answered 404: that image tag or digest does not exist.",
            "Look up the exact tag on the registry (e.g. `pytorch/pytorch:2.3.1-cuda12.1-cudnn8-runtime`, "
            "`nvcr.io#nvidia/pytorch:24.01-py3`) and correct the Image field, or clone a job whose image worked. "
            + base_fix,
        )
    if code == "429":
        return (
            "The registry rate-limited the image download (429 Too Many Requests).",
            "Resubmit a little later (clone the job); if it keeps happening, tell the admins.",
        )
    if code and code.startswith("5"):
        return (
            f"The registry had a server error ({code}) while the image was downloaded.",
            "Resubmit later (clone the job); if it persists, tell the admins.",
        )
    if "manifest unknown" in line:
        return (
            "The registry does not know that tag or digest (manifest unknown).",
            "Correct the tag or digest in the Image field; look it up on the registry first. " + base_fix,
        )
    return None


def _explain_driver(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0).lower()
    need = m.groupdict().get("need")
    if need:
        return (
            f"The image needs NVIDIA driver {need} or later, but the node has an older driver (and this GPU "
            "cannot use CUDA forward compatibility).",
            "Choose an older release of the image, built for a CUDA version that driver supports (e.g. a CUDA 12.1 "
            "or 11.8 build of PyTorch/TensorFlow), or clone a job whose image ran on this GPU type.",
        )
    if "insufficient" in text or "too old" in text or "forward compatibility" in text or "compat" in text:
        return (
            "The CUDA version inside the image is newer than the NVIDIA driver on the node supports "
            "(and this GPU cannot use CUDA forward compatibility).",
            "Choose an image built for an older CUDA (e.g. a CUDA 12.1 or 11.8 build of PyTorch/TensorFlow) that "
            "the node's driver supports, or clone a job whose image ran on this GPU type.",
        )
    if "couldn't communicate" in text or "nvidia-smi has failed" in text or "found no nvidia driver" in text:
        return (
            "The container could not reach the NVIDIA driver: the job ran without a GPU allocated, or the driver "
            "on the node is not working.",
            "Make sure the job requests at least one GPU (GPU type and count). If it did, clone the job and resubmit, "
            "and tell the admins the node name; do not install NVIDIA driver packages inside the image.",
        )
    if "mismatch" in text:
        return (
            "The NVIDIA driver libraries do not match the loaded kernel driver: the node's driver was updated "
            "and the node was not rebooted, or the image ships its own driver libraries.",
            "Clone the job and resubmit (it will likely land on another node) and tell the admins the node name; "
            "do not install NVIDIA driver packages (libnvidia-*, nvidia-utils) inside the image.",
        )
    return None


def _explain_missing_lib(m: re.Match[str], line: str) -> tuple[str, str] | None:
    lib = m.group("lib")
    if lib.startswith(("libcuda.so", "libnvidia-ml.so", "libnvidia-")):
        return (
            f"`{lib}` comes from the node's NVIDIA driver and is missing in the container: the job ran "
            "without a GPU (GPU count 0), or the image hides the driver libraries.",
            "Request at least one GPU (GPU type and count) in the job form, and do not override LD_LIBRARY_PATH "
            "or NVIDIA_VISIBLE_DEVICES in the command.",
        )
    return (
        f"A compiled library, `{lib}`, is missing in the image: a package was built against a different "
        "CUDA/cuDNN or framework version than the one the image provides.",
        "Use an image whose CUDA version matches the package (e.g. pip wheels for cu121 on a CUDA 12.1 image), "
        "install the package's matching CUDA build, or choose an official image that already contains it.",
    )


_PIP_NAMES = {
    "cv2": "opencv-python-headless",
    "sklearn": "scikit-learn",
    "PIL": "pillow",
    "yaml": "pyyaml",
    "skimage": "scikit-image",
    "bs4": "beautifulsoup4",
    "Crypto": "pycryptodome",
    "dateutil": "python-dateutil",
    "google.protobuf": "protobuf",
    "attr": "attrs",
    "wandb": "wandb",
}


def _explain_module(m: re.Match[str], line: str) -> tuple[str, str] | None:
    module = m.group("module").strip()
    top = module.split(".")[0]
    pip_name = _PIP_NAMES.get(module) or _PIP_NAMES.get(top) or top
    pip_hint = f"`pip install {pip_name}`" + (f" (the package for `{top}` is `{pip_name}`)" if pip_name != top else "")
    return (
        f"Python could not import `{module}`: the package is not installed in the container image the job used.",
        f"Install it in the image ({pip_hint} in your Dockerfile) and choose that image, pick an image that "
        f"already has it, or prefix the command with `pip install --user {pip_name} && ` (reinstalls every run).",
    )


_XID_CODES: dict[int, tuple[str, bool]] = {
    # code: (explanation, caused by the application rather than the hardware)
    13: (
        "Xid 13 is a graphics engine exception: usually an application bug (an out-of-range access in a CUDA "
        "kernel), rarely a driver or hardware fault.",
        True,
    ),
    31: (
        "Xid 31 is a GPU memory page fault (MMU fault): usually the application accessed an invalid GPU address "
        "(a bug in the code or in a custom CUDA extension), rarely a driver or hardware fault.",
        True,
    ),
    43: (
        "Xid 43 means the GPU stopped processing the application's work after it hit a fault (often right after "
        "Xid 13 or 31); the GPU itself is usually fine.",
        True,
    ),
    45: (
        "Xid 45 is the driver cleaning up after a process was killed or crashed; the real cause is the error "
        "before it.",
        True,
    ),
    48: ("Xid 48 is a double-bit ECC error: an uncorrectable GPU memory hardware error.", False),
    63: (
        "Xid 63 is an ECC page retirement / row remapping event: the driver retired a faulty memory row; "
        "harmless once, a hardware problem if it repeats.",
        False,
    ),
    64: ("Xid 64 means ECC page retirement or row remapping failed: a GPU memory hardware fault.", False),
    74: ("Xid 74 is an NVLink error: a fault on the link between GPUs of the node.", False),
    79: (
        "Xid 79 means the GPU has fallen off the bus: it stopped answering on PCIe (hardware, power or overheating).",
        False,
    ),
    92: ("Xid 92 reports a high single-bit ECC error rate: the GPU's memory is degrading.", False),
    94: (
        "Xid 94 is a contained ECC error: an uncorrectable memory error was confined to this application; "
        "the GPU stays usable and a rerun usually works.",
        False,
    ),
    95: (
        "Xid 95 is an uncontained ECC error: an uncorrectable memory error hit every application on the GPU, "
        "which needs a reset.",
        False,
    ),
    119: ("Xid 119 is a GSP timeout: the GPU's firmware processor stopped responding.", False),
    120: ("Xid 120 is a GSP error: the GPU's firmware processor reported a fault.", False),
}


def _explain_xid(m: re.Match[str], line: str) -> tuple[str, str] | None:
    code = int(m.group("code"))
    known = _XID_CODES.get(code)
    if known is None:
        return None
    text, app_fault = known
    if app_fault:
        return (
            text,
            "Debug the code: rerun with CUDA_LAUNCH_BLOCKING=1 to see the failing operation, check index ranges and "
            "custom CUDA extensions (rebuild them for this image), or run under `compute-sanitizer`.",
        )
    return (
        text + " It is not caused by your code.",
        "Clone the job and resubmit (with requeue on node failure it restarts by itself), resume from your last "
        "checkpoint, and tell the admins the node name so they can drain and check that GPU.",
    )


def _explain_nccl(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    if "Watchdog" in text or re.search(r"(?i)time(?:d )?out", text):
        return (
            "A collective operation (all-reduce, broadcast...) timed out: one rank stopped taking part, usually "
            "because it crashed (look for an earlier error, e.g. out of memory), hung in data loading or ran "
            "a different number of steps.",
            "Find the first error of any rank above this one and fix that; make every rank run the same number "
            "of steps and batches; for slow but healthy steps raise the process group timeout "
            "(`init_process_group(timeout=...)`); set NCCL_DEBUG=INFO to see which rank stalled.",
        )
    if "UnhandledCuda" in text or "unhandled cuda error" in text:
        return (
            "NCCL hit a CUDA error underneath: the real failure is a CUDA error on one of the GPUs (often out of "
            "memory or a GPU fault).",
            "Look for the CUDA error or Xid before this line and fix that; rerun with NCCL_DEBUG=INFO to see it. "
            "If the job used more GPUs than it needs, try a smaller GPU count to check it runs.",
        )
    return None


def _explain_data_permission(m: re.Match[str], line: str) -> tuple[str, str] | None:
    if "Read-only file system" in line:
        return (
            "The job tried to write to a read-only path under /data.",
            "Write outputs and checkpoints to a writable directory of your data mount (the one chosen in the job "
            "form), or set the output path of your script to it.",
        )
    return None


def _explain_disk_full(m: re.Match[str], line: str) -> tuple[str, str] | None:
    if re.search(r"/data\b", line):
        return (
            "The data mount /data (the node's NVMe cache) is full.",
            "Delete old checkpoints and datasets from /data, keep fewer checkpoints (e.g. only the last and the "
            "best), or choose a larger NVMe cache (GB) in the job form if your plan allows.",
        )
    return None


def _explain_arch(m: re.Match[str], line: str) -> tuple[str, str] | None:
    sm = m.groupdict().get("sm")
    if not sm:
        return None
    return (
        f"The framework in the image was not compiled for this GPU's architecture (sm_{sm}): it is too old "
        "for the GPU type the job ran on.",
        "Choose a newer official image (RTX 4090 sm_89 and H100 sm_90 need CUDA 11.8+ builds, e.g. PyTorch 2.x), "
        "or choose a GPU type the image supports.",
    )


# --- the rules, in priority order -------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    Rule(
        rule_id="container-mount",
        title="Container mount failed",
        cause="Enroot could not mount a directory into the container, so the job never started: the source "
        "directory does not exist on the node or is not accessible.",
        fix="Check the data mount in the job form: the path must exist in your NVMe cache and be mounted at /data; "
        "create the directory first, and do not add extra container mounts of paths that only exist elsewhere.",
        patterns=_re(r"enroot-mount: failed to mount[^\n]{0,300}"),
    ),
    Rule(
        rule_id="image-import",
        title="Container image could not be imported",
        cause="Pyxis/Enroot could not download or unpack the container image, so the job never started.",
        fix="Check the Image field: registry, name and tag (or sha256 digest) must exist exactly as written, and "
        "tags are pinned (never `latest`). The free tier may use only the official PyTorch and TensorFlow images.",
        patterns=_re(
            r"\[ERROR\] URL (?P<url>\S{1,500}) returned error code: (?P<code>\d{3})",
            r"manifest unknown",
            r"enroot-(?!mount\b)[\w.-]{1,40}:[^\n]{0,200}?No such file",
            r"\[ERROR\] No such file or directory:",
            r"pyxis: failed to import docker image",
        ),
        explain=_explain_image_import,
    ),
    Rule(
        rule_id="driver-mismatch",
        title="GPU driver and container do not match",
        cause="The program in the container could not use the node's NVIDIA driver: the image's CUDA is newer than "
        "the driver supports, or the container could not reach the driver at all.",
        fix="Choose an image built for a CUDA version the node's driver supports (e.g. an older release of the "
        "official PyTorch/TensorFlow image); if an image that worked before fails the same way, clone and resubmit "
        "and tell the admins the node name.",
        patterns=_re(
            r"This container was built for NVIDIA Driver Release (?P<need>[\d.]{1,20}) or later",
            r"CUDA driver version is insufficient for CUDA runtime version",
            r"[Ff]orward compatibility was attempted on non supported HW",
            r"CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE",
            r"system has unsupported display driver / cuda driver combination",
            r"The NVIDIA driver on your system is too old",
            r"[Dd]river/library version mismatch",
            r"couldn't communicate with the NVIDIA driver",
            r"NVIDIA-SMI has failed",
            r"Found no NVIDIA driver on your system",
        ),
        explain=_explain_driver,
    ),
    Rule(
        rule_id="unsupported-gpu-arch",
        title="Image not built for this GPU",
        cause="The framework or a CUDA extension in the image has no compiled kernels for the GPU the job ran on.",
        fix="Choose a newer official image (RTX 4090 and H100 need CUDA 11.8+ builds, e.g. PyTorch 2.x), rebuild "
        "custom CUDA extensions for this GPU (TORCH_CUDA_ARCH_LIST), or choose a GPU type the image supports.",
        patterns=_re(
            r"CUDA capability sm_(?P<sm>\d{2,3}) is not compatible with the current PyTorch installation",
            r"no kernel image is available for execution on the device",
            r"cudaErrorNoKernelImageForDevice",
            r"CUDA_ERROR_NO_BINARY_FOR_GPU",
        ),
        explain=_explain_arch,
    ),
    Rule(
        rule_id="no-gpu",
        title="No GPU visible to the program",
        cause="The program found no usable GPU: the job ran without a GPU, CUDA_VISIBLE_DEVICES hid it, or the "
        "framework in the image is a CPU-only build.",
        fix="Request at least one GPU (GPU type and count) in the job form, do not set CUDA_VISIBLE_DEVICES yourself "
        "in the command, and use a CUDA build of the framework (the official PyTorch/TensorFlow GPU images).",
        patterns=_re(
            r"no CUDA-capable device is detected",
            r"No CUDA GPUs are available",
            r"CUDA_ERROR_NO_DEVICE",
            r"Torch not compiled with CUDA enabled",
            r"torch\.cuda\.is_available\(\)[^\n]{0,40}?\bFalse\b",
        ),
    ),
    Rule(
        rule_id="missing-shared-lib",
        title="Shared library missing in the image",
        cause="A compiled library is missing in the image: a package was built for a different CUDA or framework "
        "version than the image provides.",
        fix="Use an image whose CUDA version matches the package, or choose an official image that already "
        "contains it.",
        # Only errors: NCCL, for one, logs a harmless "libnccl-net.so: cannot open shared object file" at INFO level.
        patterns=_re(
            r"(?:ImportError|OSError|error while loading shared libraries): (?:[^\s:]{0,300}/)?"
            r"(?P<lib>lib[\w.+-]{1,80}\.so[\w.]{0,20}): cannot open shared object file"
        ),
        explain=_explain_missing_lib,
    ),
    Rule(
        rule_id="module-not-found",
        title="Python module not installed",
        cause="Python could not import a module: the package is not installed in the container image the job used.",
        fix="Install the package in the image (`pip install` in your Dockerfile) and choose that image, or pick an "
        "image that already has it.",
        patterns=_re(
            r"ModuleNotFoundError: No module named '(?P<module>[^'\n]{1,200})'",
            r"ImportError: No module named '?(?P<module>[\w.]{1,200})",
        ),
        explain=_explain_module,
    ),
    Rule(
        rule_id="cuda-oom",
        title="CUDA out of memory",
        cause="The GPU ran out of memory: the model, its activations and the batch need more GPU memory than the "
        "card (or your share of it) has.",
        fix="Lower the batch size, enable gradient checkpointing or mixed precision, or " + _GPU_MEMORY_HINT + ". "
        "If much memory is 'reserved but unallocated', set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        patterns=_re(
            r"CUDA out of memory",
            r"OOM when allocating tensor",
            r"RESOURCE_EXHAUSTED: Out of memory",
            r"CUDA_ERROR_OUT_OF_MEMORY",
            r"CUDA error: out of memory",
            r"cudaErrorMemoryAllocation",
            r"torch\.(?:cuda\.)?OutOfMemoryError",
            r"ResourceExhaustedError",
        ),
    ),
    Rule(
        rule_id="cublas-cudnn-alloc",
        title="cuBLAS/cuDNN could not initialise (usually GPU memory)",
        cause="cuBLAS or cuDNN could not allocate its workspace or initialise: almost always the GPU memory was "
        "already full (by this job, or by TensorFlow reserving it all); rarely a cuDNN that does not match the "
        "framework.",
        fix="Treat it as out of memory: lower the batch size or use mixed precision, or " + _GPU_MEMORY_HINT + "; "
        "for TensorFlow set TF_FORCE_GPU_ALLOW_GROWTH=true. If memory is not the issue, use an official image "
        "instead of installing a separate cuDNN.",
        patterns=_re(
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"CUDNN_STATUS_NOT_INITIALIZED",
            r"CUDNN_STATUS_ALLOC_FAILED",
            r"CUBLAS_STATUS_NOT_INITIALIZED",
            r"Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        ),
    ),
    Rule(
        rule_id="device-assert",
        title="CUDA device-side assert",
        cause="A check inside a GPU kernel failed: most often a class label outside [0, num_classes) given to a loss "
        "function, or an index out of range in an embedding or gather.",
        fix="Check the ranges of labels and indices (e.g. `assert labels.max() < num_classes`, vocabulary size vs. "
        "token ids); rerun with CUDA_LAUNCH_BLOCKING=1, or one batch on the CPU, to get a readable error.",
        patterns=_re(r"device-side assert triggered", r"cudaErrorAssert"),
    ),
    Rule(
        rule_id="xid",
        title="NVIDIA Xid error (GPU fault)",
        cause="The NVIDIA driver reported an Xid error: a GPU fault caused by the application or by the hardware.",
        fix="If it names a hardware fault or repeats on the same node, clone and resubmit and tell the admins the "
        "node name; otherwise debug the code with CUDA_LAUNCH_BLOCKING=1.",
        patterns=_re(r"Xid \([^)\n]{0,60}\): (?P<code>\d{1,4})\b"),
        explain=_explain_xid,
    ),
    Rule(
        rule_id="illegal-memory-access",
        title="CUDA illegal memory access",
        cause="A GPU kernel read or wrote memory it does not own: a bug in a custom CUDA extension or kernel, an "
        "extension built for another framework version, or (rarely) a faulty GPU.",
        fix="Rerun with CUDA_LAUNCH_BLOCKING=1 to find the operation; rebuild custom extensions (flash-attn, apex...) "
        "for the image's PyTorch/CUDA or use an official image that includes them; if it only fails on one node, "
        "tell the admins the node name.",
        patterns=_re(
            r"an illegal memory access was encountered",
            r"cudaErrorIllegalAddress",
            r"CUDA_ERROR_ILLEGAL_ADDRESS",
            r"CUDA error: misaligned address",
            r"CUDA error: unspecified launch failure",
        ),
    ),
    Rule(
        rule_id="shm-exhausted",
        title="Shared memory exhausted (DataLoader)",
        cause="DataLoader workers pass batches through shared memory (/dev/shm), and the container's shared memory "
        "ran out.",
        fix="Lower DataLoader num_workers or the batch size, or call "
        "`torch.multiprocessing.set_sharing_strategy('file_system')` at the start of the script.",
        patterns=_re(
            r"insufficient shared memory \(shm\)",
            r"unable to (?:write to file|open shared memory object|mmap)[^\n]{0,20}</torch_",
            r"DataLoader worker \(pid[^\n]{0,60}?is killed by signal: Bus error",
        ),
    ),
    Rule(
        rule_id="disk-full",
        title="No space left on device",
        cause="A file system the job writes to is full: the container's own file system (/tmp, caches) or the data "
        "mount /data.",
        fix="Write checkpoints, caches and temporary files under /data (e.g. `TMPDIR=/data/tmp`, "
        "`HF_HOME=/data/hf-cache`), delete old checkpoints, or choose a larger NVMe cache (GB) in the job form.",
        patterns=_re(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded"),
        explain=_explain_disk_full,
    ),
    Rule(
        rule_id="data-permission",
        title="Permission denied on the data mount",
        cause="The job was not allowed to read or write a path under /data: the files belong to another user or "
        "lack permissions, or the path is not part of your data mount.",
        fix="Check the data mount chosen in the job form and the path in your command; make your files readable and "
        "your output directory writable (`chmod -R u+rwX /data/<your dir>`), and write only inside your own "
        "directory of /data.",
        patterns=_re(
            r"PermissionError: \[Errno 13\] Permission denied: '/data\b",
            r"\[Errno 30\] Read-only file system: '/data\b",
            r"/data(?<![\w/.-]/data)(?:/[^\s:'\"]{0,250})?['\"]?: Permission denied",
            r"Permission denied: '?/data\b",
        ),
        explain=_explain_data_permission,
    ),
    Rule(
        rule_id="dist-port-in-use",
        title="Distributed port already in use",
        cause="torch.distributed could not open its rendezvous port because another job on the same node already "
        "uses that MASTER_PORT.",
        fix="Derive the port from the job id, e.g. `export MASTER_PORT=$((20000 + SLURM_JOB_ID % 20000))`, or use "
        "`torchrun --rdzv-endpoint=localhost:0` / `--standalone` on a single node.",
        patterns=_re(
            r"EADDRINUSE",
            r"errno: 98 - Address already in use",
            r"The server socket has failed to (?:listen|bind)[^\n]{0,200}?\(errno: 98",
        ),
    ),
    Rule(
        rule_id="host-oom",
        title="Host memory exhausted (OOM kill)",
        cause="The job used more host (CPU) memory than its allocation, and the kernel's out-of-memory killer stopped "
        "it; GPU memory is not involved.",
        fix="Load data lazily instead of into RAM (memory-map or stream from /data), lower DataLoader num_workers and "
        "prefetch_factor, and avoid keeping tensors or outputs in Python lists; host memory comes with the GPU "
        "allocation, so a larger GPU count also brings more.",
        patterns=_re(
            r"Detected \d+ oom[-_]kill event",
            r"oom[-_]kill event",
            r"oom[-_]kill\b",
            r"Out Of Memory\b",
            r"Memory cgroup out of memory",
            r"[Ee]xceeded (?:job |step )?memory limit",
        ),
        states=frozenset({"OUT_OF_MEMORY"}),
    ),
    Rule(
        rule_id="node-fail",
        title="Node failure",
        cause="The node running the job failed or could not boot; this is not caused by your code.",
        fix="Clone the job and resubmit, resuming from your last checkpoint; enable requeue on node failure "
        "(`--requeue`) so Slurm restarts such jobs by itself.",
        patterns=_re(r"DUE TO NODE FAILURE", r"NODE_FAIL\b"),
        states=frozenset({"NODE_FAIL", "BOOT_FAIL"}),
    ),
    Rule(
        rule_id="preempted",
        title="Job preempted",
        cause="Slurm stopped the job to give its GPUs to a higher-priority job (spot/off-peak and free-tier jobs can "
        "be preempted).",
        fix="Save checkpoints often and resume from the last one; enable requeue so the job restarts by itself, or "
        "submit it as a regular (non-spot) job.",
        patterns=_re(r"DUE TO PREEMPTION"),
        states=frozenset({"PREEMPTED"}),
    ),
    Rule(
        rule_id="time-limit",
        title="Time limit reached",
        cause="The job ran longer than its time limit and Slurm stopped it.",
        fix="Raise the time limit in the job form (clone the job to keep everything else), and save checkpoints "
        "regularly so a resubmitted job resumes instead of starting over.",
        patterns=_re(r"DUE TO TIME LIMIT"),
        states=frozenset({"TIMEOUT", "DEADLINE"}),
    ),
    Rule(
        rule_id="segfault",
        title="Segmentation fault",
        cause="A native library crashed (SIGSEGV): usually packages compiled against different versions "
        "(e.g. pip-installed torch over the image's, numpy 2 with older extensions) or a crash in a data-loading "
        "library.",
        fix="Use an official image without reinstalling torch/numpy over it, test with DataLoader num_workers=0, and "
        "run `python -X faulthandler ...` to see the Python line that crashed.",
        patterns=_re(
            r"Segmentation fault",
            r"SIGSEGV\b",
            r"signal 11\b",
        ),
        exit_codes=frozenset({139}),
    ),
    Rule(
        rule_id="nccl",
        title="NCCL communication error",
        cause="Communication between the GPUs (NCCL) failed: usually because one rank crashed or stalled, sometimes "
        "because of a network or GPU-interconnect problem.",
        fix="Look for the first error of any rank above this line (out of memory, a crash) and fix that; rerun with "
        "NCCL_DEBUG=INFO; if it repeats on the same node, tell the admins the node name. To check the code, try "
        "a single GPU (GPU count 1).",
        patterns=_re(
            r"Watchdog caught collective operation timeout[^\n]{0,200}",
            r"NCCL WARN[^\n]{0,200}?(?i:timeout|timed out)",
            r"nccl(?:UnhandledCuda|System|Internal|Remote|InvalidUsage|InvalidArgument)Error\b",
            r"NCCL error[^\n]{0,200}",
            r"DistBackendError",
        ),
        explain=_explain_nccl,
    ),
    Rule(
        rule_id="killed",
        title="Process killed (SIGKILL)",
        cause="The process was killed with SIGKILL (exit code 137): on this cluster that almost always means it used "
        "more host memory than its allocation, or it was cancelled.",
        fix="Reduce host memory use: load data lazily from /data, lower DataLoader num_workers, and do not keep "
        "outputs in RAM; host memory comes with the GPU allocation, so a larger GPU count also brings more.",
        patterns=_re(
            r"line \d+: +\d+ Killed\b",
            r"Killed(?<![^\n \t]Killed)[ \t]*\r?$",
            r"task \d+: Killed\b",
            r"killed by signal: Killed",
        ),
        exit_codes=frozenset({137}),
        log_needs_exit_code=frozenset({137, 9, -9}),
        suppressed_by=("host-oom", "time-limit", "node-fail", "preempted"),
    ),
)


# --- matching ---------------------------------------------------------------------------------------------------


def _evidence_line(text: str, start: int, end: int) -> str:
    """The line holding text[start:end], narrowed to its `\\r` segment and to EVIDENCE_MAX chars around the match."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    if line_end == -1:
        line_end = len(text)
    # Progress bars rewrite a line with "\r": keep only the segment that holds the match.
    cr = text.rfind("\r", line_start, start)
    if cr != -1:
        line_start = cr + 1
    cr = text.find("\r", end, line_end)
    if cr != -1 and text[cr + 1 : line_end].strip():
        line_end = cr
    # Skip leading blanks before deciding the window, so stripping does not eat into it.
    while line_start < start and text[line_start] in " \t\r\f\v":
        line_start += 1
    if line_end - line_start > EVIDENCE_MAX:
        lo = max(line_start, min(start - 80, line_end - EVIDENCE_MAX))
        line_start, line_end = lo, min(line_end, lo + EVIDENCE_MAX)
    snippet = text[line_start:line_end]
    snippet = "".join(ch if ch.isprintable() else " " for ch in snippet)
    return snippet.strip()[:EVIDENCE_MAX]


def _normalise_state(state: object) -> str:
    if not isinstance(state, str):
        return ""
    parts = state.strip().upper().split()
    # Slurm sometimes reports "CANCELLED by 1234" or a list "CANCELLED,COMPLETING".
    return parts[0].split(",")[0] if parts else ""


def _match_rule(rule: Rule, text: str, line_offset: int, state: str, exit_code: int | None) -> Finding | None:
    log_allowed = rule.log_needs_exit_code is None or exit_code is None or exit_code in rule.log_needs_exit_code
    if log_allowed:
        for pattern in rule.patterns:
            m = pattern.search(text)
            if m is None:
                continue
            evidence = _evidence_line(text, m.start(), m.end())
            cause, fix = rule.cause, rule.fix
            if rule.explain is not None:
                tailored = rule.explain(m, evidence)
                if tailored is not None:
                    cause, fix = tailored
            line_number = line_offset + text.count("\n", 0, m.start()) + 1
            return Finding(rule.rule_id, rule.title, cause, fix, evidence, line_number)
    if state and state in rule.states:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Slurm job state: {state}", 0)
    if exit_code is not None and exit_code in rule.exit_codes:
        return Finding(rule.rule_id, rule.title, rule.cause, rule.fix, f"Exit code: {exit_code}", 0)
    return None


def diagnose(
    text: str, *, state: str | None = None, exit_code: int | None = None, max_findings: int = 5
) -> list[Finding]:
    """The failures recognised in a job's log, most specific first, at most `max_findings` of them."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    elif not isinstance(text, str):
        text = ""
    if not isinstance(exit_code, int) or isinstance(exit_code, bool):
        exit_code = None
    try:
        limit = int(max_findings)
    except (TypeError, ValueError):
        limit = 5
    if limit <= 0:
        return []
    line_offset = 0
    if len(text) > MAX_SCAN_CHARS:
        cut = len(text) - MAX_SCAN_CHARS
        line_offset = text.count("\n", 0, cut)
        text = text[cut:]
    normalised_state = _normalise_state(state)

    findings: list[Finding] = []
    found: set[str] = set()
    for rule in RULES:
        if len(findings) >= limit:
            break
        if found.intersection(rule.suppressed_by):
            continue
        try:
            finding = _match_rule(rule, text, line_offset, normalised_state, exit_code)
        except Exception:  # a broken rule must not take the job page down
            log.exception("diagnosis rule %s failed", rule.rule_id)
            continue
        if finding is not None:
            findings.append(finding)
            found.add(rule.rule_id)
    return findings
