"""The log analyser's rules (see `jobs.diagnosis.diagnose`): what each failure looks like, its cause and its fix.

The rules are data. Each `Rule` has compiled patterns in order of preference (the first pattern that matches
anywhere gives the evidence), optional runs (a pattern that counts only when it repeats on nearby lines),
optional Slurm states or exit codes that fire it even when the log says nothing, and optionally a function
(`jobs.diagnosis.explain`) that tailors the cause and the fix to what matched.

The order of RULES is the order of the findings: a failure that explains another comes first (a GPU that could
not be used before "no GPU", a failed `pip install` before the missing module, a hardware Xid before the CUDA and
NCCL errors it caused), or suppresses it when the second says nothing more (an image that could not be imported
and the container that then could not start, a preemption and the kill it caused).

The patterns never use `.*`: spans within a line are bounded (`[^\\n]{0,N}`), so a multi-megabyte single line
costs linear time. A pattern may mark with a group named `at` the part that is the evidence (a multi-line
pattern whose last line is the error); otherwise the whole match is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import IntEnum

from jobs.diagnosis.container_rules import CONTAINER_RULES
from jobs.diagnosis.explain import (
    GPU_MEMORY_HINT,
    ONE_PROCESS_PER_GPU,
    WRITE_UNDER_DATA,
    Explain,
    explain_arch,
    explain_container_start,
    explain_data_permission,
    explain_device_ordinal,
    explain_disk_full,
    explain_driver,
    explain_exception,
    explain_glibc,
    explain_gpu_oom,
    explain_gpu_unavailable,
    explain_image_import,
    explain_missing_lib,
    explain_module,
    explain_nan,
    explain_nccl,
    explain_permission,
    explain_preempted,
    explain_time_limit,
    explain_xid,
)


@dataclass(frozen=True)
class Run:
    """`pattern` matching on at least `count` lines in a row, each at most `within_lines` after the previous one.

    For messages that are normal once or twice and a failure when they repeat (a loss scaler skipping steps).
    """

    pattern: re.Pattern[str]
    count: int
    within_lines: int


class Stage(IntEnum):
    """Where a failure sits in the chain of cause and effect; the engine ranks findings by it, then by table order.

    A failure of an earlier stage explains those of later ones: a GPU with a memory fault before the CUDA errors
    it raises, a resource that ran out before the program that then crashed, one rank's own error before the
    NCCL timeouts and signals of the others, and a launcher's exit summary only when nothing else was found.
    """

    PLATFORM = 0  # the node, its GPUs, the container runtime, Slurm refusing the job or its step
    # Before ENVIRONMENT: a full disk or memory also breaks installs, downloads and compilers, whatever reports it.
    RESOURCE = 1  # something that ran out: GPU or host memory, disk, shared memory
    ENVIRONMENT = 2  # what the job was given: image, libraries, GPU architecture, network, permissions
    PROGRAM = 3  # the program's own failure: a kernel assert, NaN, a crash, an uncaught exception
    LIMIT = 4  # the scheduler ended the job: time limit, preemption
    CONSEQUENCE = 5  # what other processes report after one failed: NCCL errors, rendezvous timeouts, kills
    WRAPPER = 6  # launchers and wrappers reporting that a child exited


@dataclass(frozen=True)
class Rule:
    rule_id: str
    title: str
    cause: str
    fix: str
    patterns: tuple[re.Pattern[str], ...]
    # Tried after the patterns: repeated messages; the evidence is the line where the run reaches its count.
    runs: tuple[Run, ...] = ()
    # Slurm states that fire the rule even without log evidence.
    states: frozenset[str] = frozenset()
    # Exit codes that fire the rule even without log evidence.
    exit_codes: frozenset[int] = frozenset()
    # When set and the exit code is known, log evidence counts only with one of these exit codes.
    log_needs_exit_code: frozenset[int] | None = None
    # Skip this rule when one of these has already been found (it explains this one).
    suppressed_by: tuple[str, ...] = ()
    explain: Explain | None = field(default=None, compare=False)
    # Its place in the chain of cause and effect (see Stage); findings are ranked by it before table order.
    stage: Stage = Stage.PROGRAM
    # A catch-all: reported only when no other rule of its stage or an earlier one has been found.
    fallback: bool = False
    # Patterns (also listed in `patterns`) whose failure may recover: they count only when none of `cleared_by`
    # matches after their last match (a NaN loss logged once, then finite losses again).
    clearable: tuple[re.Pattern[str], ...] = ()
    cleared_by: tuple[re.Pattern[str], ...] = ()


def _re(*patterns: str, flags: int = 0) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(p, flags | re.MULTILINE) for p in patterns)


# Phrases of a socket connection that failed or broke (NCCL's WARN lines and the "Last error:" it reports).
_CONNECTION_FAILED = (
    r"(?:Connection refused|Connection reset by peer|Connection closed by (?:remote )?peer|closed connection"
    r"|Connection timed out|No route to host|Network is unreachable|Software caused connection abort|Broken pipe"
    r"|exceeded (?:error )?retr(?:y|ies)|Got completion (?:from peer|with error)|no (?:socket )?interface found"
    r"|Cannot assign requested address|Socket recv failed|Failed to execute operation Connect"
    r"|Connect to [^\n]{1,80}? failed)"
)
# The first "NCCL WARN" of a line, atomically: a line of many WARNs is scanned once, not once per WARN.
_NCCL_WARN = r"^(?>[^\n]{0,120}?NCCL WARN)"
# The first "overflow" of a line, atomically, for the same reason.
_OVERFLOW = r"^(?>[^\n]{0,200}?[Oo](?i:verflow))"
# A loss scale of 1 or less: after that many halvings, the gradients are not finite at all.
_TINY_SCALE = r"(?:1(?:\.0{1,20})?|0\.\d{1,40}(?:e-\d{1,4})?|\d(?:\.\d{1,40})?e-\d{1,4})(?![\w.+-])"
# A NaN/Inf loss as logged by a trainer: an error only if no finite loss is logged after it.
_LOGGED_NAN = _re(
    r"loss['\"]: ?(?:nan|NaN|-?inf|-?Infinity)\b",
    r"[Ll]oss(?:_(?:step|epoch|avg|mean))?(?: ?[=:] ?| )(?:tensor\()?-?(?:nan|NaN|inf|Inf)\b(?![\w.])",
)
# Where a job may not write: the paths of the generic permission rule leave /data to `data-permission`.
_NOT_DATA = r"(?!/data\b)"


# --- the rules, in priority order -------------------------------------------------------------------------------

RULES: tuple[Rule, ...] = (
    # --- platform --------------------------------------------------------------------------------------------
    # The pool's own container runtime (jobs/diagnosis/container_rules.py): more specific than the ones below.
    *(Rule(**fields, stage=Stage.PLATFORM) for fields in CONTAINER_RULES),
    Rule(
        rule_id="container-mount",
        title="Container mount failed",
        cause="Enroot could not mount a directory into the container, so the job never started: the source "
        "directory does not exist on the node or is not accessible.",
        fix="Check the data mount in the job form: the path must exist in your NVMe cache and be mounted at /data; "
        "create the directory first, and do not add extra container mounts of paths that only exist elsewhere.",
        patterns=_re(r"enroot-mount: failed to mount[^\n]{0,300}"),
        stage=Stage.PLATFORM,
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
            # The first "enroot-" of a line, atomically, so a line of many costs one scan.
            r"^(?>[^\n]{0,200}?enroot-)(?!mount\b|nsenter\b|switchroot\b)[\w.-]{1,40}:[^\n]{0,200}?No such file",
            r"\[ERROR\] No such file or directory:",
            r"pyxis: failed to import docker image",
        ),
        explain=explain_image_import,
        stage=Stage.PLATFORM,
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
            r"requirement error: unsatisfied condition: cuda ?>= ?(?P<cuda>[\d.]{1,10})",
        ),
        explain=explain_driver,
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="container-runtime",
        title="Docker, Podman or Shifter could not start the container",
        cause="The job started a container with a runtime of its own (Docker, Podman, Shifter...) instead of the "
        "pool's, and that runtime could not start it: no Docker daemon on the compute node, a GPU request the "
        "runtime has no driver or hook for (`--gpus all` without the NVIDIA container toolkit), or an image it "
        "could not mount.",
        fix="Give the image in the job form's Image field and the command without `docker run`/`podman run`: the "
        "pool runs every job's container itself (Pyxis/Enroot) with the job's GPUs already inside, so no runtime "
        "or `--gpus` flag is needed. An image only on Docker Hub or in your own registry can be added to the "
        "pool's catalogue by the admins.",
        patterns=_re(
            r"could not select device driver \"[^\"\n]{0,40}\" with capabilities: \[\[gpu\]\]",
            r"docker: Error response from daemon: [^\n]{1,300}",
            r"Cannot connect to the Docker daemon at [^\n]{1,120}",
            r"Error: OCI runtime error: [^\n]{1,300}",
            r"OCI runtime (?:create|start|exec) failed[^\n]{0,300}",
            # Shifter (NERSC's runtime): the image's squashfs could not be mounted.
            r"FAILED to (?:loop mount image|mount image on loop device|setup image)[^\n]{0,200}",
        ),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="container-start",
        title="Container could not start",
        cause="Pyxis/Enroot imported the image but could not start the container, so your command never ran.",
        fix="Clone the job and resubmit (it may land on another node). If it fails the same way, try an official "
        "PyTorch/TensorFlow image to tell an image problem from a node problem, and tell the admins the node name "
        "and the lines under 'printing enroot log file'.",
        # The detail lines of the enroot log first: they say why; the pyxis summary lines only that it failed.
        patterns=_re(
            r"nvidia-container-cli: [\w ]{0,40}error: [^\n]{1,200}",
            r"\[ERROR\] [^\n]{0,100}?hooks\.d/[\w.-]{1,80} exited with return code \d{1,3}",
            r"enroot-nsenter: [^\n]{1,200}",
            r"enroot-switchroot: [^\n]{1,200}",
            r"pyxis: container start failed with error code: \d{1,5}",
            r"pyxis: couldn't start container",
        ),
        # The mount, the image or the driver already explain a container that did not start.
        suppressed_by=("container-mount", "image-import", "driver-mismatch", "container-runtime"),
        explain=explain_container_start,
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="apptainer",
        title="Apptainer/Singularity container could not start",
        cause="Apptainer (Singularity) could not create the container, so your command never ran: a bind path that "
        "does not exist on the node, an image it could not open or mount, or the GPU hook (`--nv`) failing.",
        fix="Bind only directories that exist on the compute node (`--bind /data`), keep the .sif image on a file "
        "system the node reads (not a path of the login node), and clone and resubmit; if an official image fails "
        "the same way on one node, tell the admins the node name.",
        patterns=_re(
            # Indented when a workflow manager (Nextflow, Snakemake) quotes it under "Command error:".
            r"^[ \t]{0,8}(?:\x1b\[\d{1,3}m)?FATAL:(?:\x1b\[0m)? {1,8}(?:container creation failed|could not open image"
            r"|while (?:mounting|extracting|creating)|Unable to (?:handle|pull|open))[^\n]{0,250}",
            r"(?:singularity|apptainer)(?:-ce)?: [^\n]{0,40}FATAL[^\n]{0,200}",
        ),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="slurm-refused",
        title="Slurm refused the job",
        cause="Slurm refused the submission or the allocation: the request does not fit the cluster's configuration "
        "or its policy (a GPU type or count no node has, a missing GPU type, more CPUs or memory per node than a "
        "node offers, or a limit of your account or QOS).",
        fix="Ask for what the GPU type offers in the job form (GPU count per node, CPUs and memory per GPU), keep the "
        "GPU type in the request, and check your plan's limits; the reason after 'failed:' names what does not fit.",
        patterns=_re(
            r"(?:sbatch|salloc|srun): error: (?:Batch job submission failed|Unable to allocate resources|Job submit"
            r"/allocate failed): [^\n]{1,200}",
            r"(?:sbatch|salloc|srun): error: (?:You must always specify a type|Cannot find GPU specification"
            r"|Invalid generic resource)[^\n]{0,200}",
        ),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="slurm-step",
        title="Slurm could not start a step inside the job",
        cause="Inside the running job, `srun` asked for more than the job's allocation holds (nodes, tasks, GPUs, "
        "CPUs or memory), or named nodes outside it, so Slurm could not create that step.",
        fix="Make each `srun` ask for at most what the job has: no more nodes or tasks than allocated, GPUs per task "
        "that add up to the job's GPU count, node lists taken from `scontrol show hostnames $SLURM_JOB_NODELIST` "
        "one per element; add `--exact` or `--overlap` when several steps share the allocation.",
        patterns=_re(r"srun: error: Unable to create (?:job )?step for job [\w.]{1,40}: [^\n]{1,200}"),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="gpu-ecc",
        title="Uncorrectable GPU memory (ECC) error",
        cause="The GPU reported an uncorrectable ECC error: its memory returned corrupted data. This is a hardware "
        "fault of that GPU, not caused by your code; the CUDA and NCCL errors after it are its consequences.",
        fix="Clone the job and resubmit (with requeue on node failure it restarts by itself), resume from your last "
        "checkpoint, and tell the admins the node name so they can drain it and reset or replace that GPU.",
        patterns=_re(
            r"uncorrectable ECC error encountered",
            r"cudaErrorECCUncorrectable",
            r"CUDA_ERROR_ECC_UNCORRECTABLE",
        ),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="xid",
        title="NVIDIA Xid error (GPU fault)",
        cause="The NVIDIA driver reported an Xid error: a GPU fault caused by the application or by the hardware.",
        fix="If it names a hardware fault or repeats on the same node, clone and resubmit and tell the admins the "
        "node name; otherwise debug the code with CUDA_LAUNCH_BLOCKING=1.",
        patterns=_re(r"Xid \([^)\n]{0,60}\): (?P<code>\d{1,4})\b"),
        explain=explain_xid,
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="node-fail",
        title="Node failure",
        cause="The node running the job failed or could not boot; this is not caused by your code.",
        fix="Clone the job and resubmit, resuming from your last checkpoint; enable requeue on node failure "
        "(`--requeue`) so Slurm restarts such jobs by itself.",
        patterns=_re(r"DUE TO NODE FAILURE", r"NODE_FAIL\b"),
        states=frozenset({"NODE_FAIL", "BOOT_FAIL"}),
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="gpu-unavailable",
        title="GPU present but not usable",
        cause="The job has its GPU, but CUDA refused to use it: the GPU runs in exclusive-process mode (one process "
        "per GPU) and another process already holds it - usually a second process of the same job on the same GPU "
        "(every rank on GPU 0, or the parent process touching CUDA before it starts the workers), sometimes a "
        "process left over on the node.",
        fix=ONE_PROCESS_PER_GPU,
        patterns=_re(
            # An error raised inside `torch.cuda.set_device(...)`: its library frame, maybe a line of carets (Python
            # 3.11+), then the error (with or without a "[rankN]:" prefix).
            r"_cuda_setDevice\(\w{0,20}\)\n(?:[ \t^\[\]\w:]{0,200}\n)?"
            r"(?P<at>[^\n]{0,60}?Error: CUDA error: "
            r"(?!no CUDA-capable|CUDA driver version|invalid device ordinal)[^\n]{1,200})",
            r"all CUDA-capable devices are busy or unavailable",
            r"CUDA-capable device\(s\) is/are busy or unavailable",
            r"cudaErrorDevicesUnavailable",
            r"CUDA_ERROR_DEVICE_UNAVAILABLE",
            r"CUDA unknown error - this may be due to an incorrectly set up environment",
            r"Error 802: system not yet initialized",
            r"failed call to cuInit: CUDA_ERROR_UNKNOWN",
            r"Unable to determine the device handle for GPU[^\n]{0,60}: (?:Unknown Error|GPU is lost)",
        ),
        explain=explain_gpu_unavailable,
        stage=Stage.PLATFORM,
    ),
    Rule(
        rule_id="mig-config",
        title="GPU in MIG mode, asked for or read as a whole GPU",
        cause="The GPU is split into MIG slices, and the job asked for or read it as a whole GPU: inside a slice "
        "NVML and nvidia-smi refuse the whole GPU's figures ('Insufficient Permissions'), and a slice that was "
        "not asked for, or that the node's layout does not have, is not there to use.",
        fix="Ask for the slice as its GPU type in the job form (Slurm: `--gres=gpu:<profile>:1`, e.g. "
        "`--gres=gpu:1g.10gb:1`), never a whole A100/H100 that is in MIG mode; do not set CUDA_VISIBLE_DEVICES "
        "to a MIG UUID yourself; read memory from the framework (`torch.cuda.mem_get_info()`) rather than from "
        "nvidia-smi or NVML. If the node's slices are not the ones its GPU type says (`nvidia-smi mig -lgi`), "
        "tell the admins the node name.",
        patterns=_re(
            r"NVMLError_NoPermission: Insufficient Permissions",
            # A tool parsing nvidia-smi's memory figure, which a MIG-mode GPU gives as "Insufficient Permissions".
            r"invalid literal for int\(\) with base 10: '\[?Insufficient'?",
            r"No MIG devices? (?:found|available)[^\n]{0,120}",
            r"MIG mode is (?:not enabled|disabled)[^\n]{0,120}",
            r"Unable to (?:find|locate) MIG device[^\n]{0,120}",
            r"Failed to create (?:GPU|compute) instance[^\n]{0,160}",
        ),
        stage=Stage.PLATFORM,
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
        stage=Stage.PLATFORM,
    ),
    # --- resource --------------------------------------------------------------------------------------------
    Rule(
        rule_id="cuda-oom",
        title="CUDA out of memory",
        cause="The GPU ran out of memory: the model, its activations and the batch need more GPU memory than the "
        "card (or your share of it) has.",
        fix="Lower the batch size, enable gradient checkpointing or mixed precision, or " + GPU_MEMORY_HINT + ". "
        "If much memory is 'reserved but unallocated', set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.",
        patterns=_re(
            r"CUDA out of memory",
            r"OOM when allocating tensor",
            # JAX/XLA, in the wordings of several jaxlib versions.
            r"RESOURCE_EXHAUSTED: (?:Out of memory|Failed to allocate)",
            r"CUDA_ERROR_OUT_OF_MEMORY",
            r"CUDA error: out of memory",
            r"cudaErrorMemoryAllocation",
            r"torch\.(?:cuda\.)?OutOfMemoryError",
            r"ResourceExhaustedError",
            # vLLM: no GPU memory left for the KV cache after the weights (the error, not its `raise` source line).
            r"Error: No available memory for the cache blocks",
            # NCCL's own CUDA allocation failing (XLA repeats NCCL's last warning in its error).
            r"Cuda failure (?:2 )?'out of memory'",
        ),
        explain=explain_gpu_oom,
        stage=Stage.RESOURCE,
    ),
    Rule(
        rule_id="cublas-cudnn-alloc",
        title="cuBLAS/cuDNN could not initialise (usually GPU memory)",
        cause="cuBLAS or cuDNN could not allocate its workspace or initialise: almost always the GPU memory was "
        "already full (by this job, or by TensorFlow reserving it all); rarely a cuDNN that does not match the "
        "framework.",
        fix="Treat it as out of memory: lower the batch size or use mixed precision, or " + GPU_MEMORY_HINT + "; "
        "for TensorFlow set TF_FORCE_GPU_ALLOW_GROWTH=true. If memory is not the issue, use an official image "
        "instead of installing a separate cuDNN.",
        patterns=_re(
            r"CUBLAS_STATUS_ALLOC_FAILED",
            r"CUDNN_STATUS_NOT_INITIALIZED",
            r"CUDNN_STATUS_ALLOC_FAILED",
            r"CUBLAS_STATUS_NOT_INITIALIZED",
            r"Could not create cudnn handle: CUDNN_STATUS_INTERNAL_ERROR",
        ),
        # A cuDNN of the wrong version fails to initialise too: the mismatch is the cause then.
        suppressed_by=("cuda-lib-mismatch",),
        stage=Stage.RESOURCE,
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
            # The kernel's own words (dmesg), and Ray's memory monitor killing a worker before the kernel does.
            r"Out of memory: Kill(?:ed)? process[^\n]{0,160}",
            r"invoked oom-killer[^\n]{0,120}",
            r"Task was killed due to the node running low on memory[^\n]{0,120}",
            r"ray\.exceptions\.OutOfMemoryError[^\n]{0,200}",
        ),
        states=frozenset({"OUT_OF_MEMORY"}),
        stage=Stage.RESOURCE,
    ),
    Rule(
        rule_id="host-alloc",
        title="Host memory allocation failed",
        cause="The program could not allocate host (CPU) memory: a single allocation was larger than what is left of "
        "the job's memory (std::bad_alloc, 'Cannot allocate memory'), so it failed without the OOM killer.",
        fix="Load data lazily instead of into RAM (memory-map or stream from /data), lower DataLoader num_workers, "
        "and check for an allocation far larger than intended (a wrong shape, a whole dataset in one array); host "
        "memory comes with the GPU allocation, so a larger GPU count also brings more.",
        patterns=_re(
            r"std::bad_alloc",
            r"\[Errno 12\] Cannot allocate memory[^\n]{0,120}",
            r"DefaultCPUAllocator: (?:can't allocate memory|not enough memory)[^\n]{0,200}",
            r"_ArrayMemoryError: Unable to allocate[^\n]{0,200}",
            r"^(?:\[rank\d{1,6}\]: )?MemoryError\b[^\n]{0,200}",
            r"Cannot allocate memory(?: \(errno \d{1,4}\))?",
        ),
        stage=Stage.RESOURCE,
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
        stage=Stage.RESOURCE,
    ),
    Rule(
        rule_id="disk-full",
        title="No space left on device",
        cause="A file system the job writes to is full: the container's own file system (/tmp, caches) or the data "
        "mount /data.",
        fix="Write checkpoints, caches and temporary files under /data (e.g. `TMPDIR=/data/tmp`, "
        "`HF_HOME=/data/hf-cache`), delete old checkpoints, or choose a larger NVMe cache (GB) in the job form.",
        patterns=_re(r"No space left on device", r"\[Errno 28\]", r"Disk quota exceeded", r"\[Errno 122\]"),
        explain=explain_disk_full,
        stage=Stage.RESOURCE,
    ),
    # --- environment -----------------------------------------------------------------------------------------
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
        explain=explain_arch,
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="mig-unsupported",
        title="MIG slice used in a way it cannot serve",
        cause="The job runs on a MIG slice (a partition of an A100/H100), and the program uses it like whole GPUs: "
        "a process can use only one MIG slice, and slices do not support peer-to-peer, NVLink or multi-GPU NCCL.",
        fix="On a MIG slice run one process on one GPU (GPU count 1, no torchrun across slices, no "
        "`CUDA_VISIBLE_DEVICES` of your own); for multi-GPU training choose a full-GPU type in the job form.",
        patterns=_re(
            r"(?i:MIG)[- ](?:device|slice|instance|mode)[^\n]{0,120}?(?:not supported|unsupported|is not allowed"
            r"|cannot|failed)[^\n]{0,120}",
            r"device >= 0 && device < num_gpus INTERNAL ASSERT FAILED[^\n]{0,200}",
            # A process asking for GPU index N where it sees fewer: a slice shows as one GPU to each process.
            r"invalid device ordinal",
            r"cudaErrorInvalidDevice\b",
            r"CUDA_ERROR_INVALID_DEVICE\b",
        ),
        explain=explain_device_ordinal,
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="glibc-mismatch",
        title="Binary needs a newer C/C++ runtime than the image has",
        cause="A compiled program or Python extension was built on a newer system than the image: it needs a "
        "version of glibc or libstdc++ (GLIBC_x / GLIBCXX_x / CXXABI_x) that the image's libraries do not provide.",
        fix="Use an image with a newer base (e.g. Ubuntu 22.04+ official PyTorch/NGC images), install the package "
        "built for this image (a wheel for its Python/manylinux, or conda's `libstdcxx-ng` in the same "
        "environment), or build the extension inside the image; do not copy binaries built on another machine.",
        patterns=_re(
            r"version [`'‘](?P<sym>(?:GLIBC|GLIBCXX|CXXABI)_[\d.]{1,12})['’] not found(?: \(required by "
            r"(?P<by>[^)\n]{1,250})\))?",
        ),
        stage=Stage.ENVIRONMENT,
        explain=explain_glibc,
    ),
    Rule(
        rule_id="cuda-lib-mismatch",
        title="cuDNN/cuBLAS at run time is not the one the framework was built for",
        cause="The framework loaded a cuDNN or cuBLAS library other than the one it was built against: an older "
        "cuDNN, or a pip-installed nvidia-* package mixed with the image's own CUDA libraries.",
        fix="Use the framework with the libraries it ships (an official PyTorch/TensorFlow image, or `pip install` "
        "the framework's own CUDA build in a clean environment); do not install separate cuDNN/cuBLAS or "
        "`nvidia-*-cu11/cu12` packages over an image, and do not point LD_LIBRARY_PATH at other CUDA libraries.",
        patterns=_re(
            r"Loaded runtime CuDNN library: (?P<have>[\d.]{1,12})[^\n]{0,40}? but source was compiled with:? "
            r"(?P<want>[\d.]{1,12})[^\n]{0,200}",
            r"lib(?:cublas|cublasLt|cudnn\w{0,20}|cusparse|cufft|curand|nccl)\.so[\w.]{0,12}: "
            r"(?:undefined symbol|symbol \w{1,100},? version \w{1,40}\.so[\w.]{0,12} not defined)[^\n]{0,200}",
            r"CUDNN_STATUS_VERSION_MISMATCH",
            r"cuDNN version incompatibility[^\n]{0,200}",
        ),
        stage=Stage.ENVIRONMENT,
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
        explain=explain_missing_lib,
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="illegal-instruction",
        title="Illegal instruction (CPU)",
        cause="The program ran a CPU instruction this node's processor does not have: a library (often a pip wheel "
        "or conda package built with AVX-512/AVX2, or a binary compiled with -march=native elsewhere) targets a "
        "newer CPU than the node's.",
        fix="Install generic builds of the packages (official wheels, not ones built on another machine), rebuild "
        "custom extensions inside the job's image without `-march=native`, or try another GPU type (other nodes "
        "have other CPUs); `ATEN_CPU_CAPABILITY=default` avoids it for PyTorch's own CPU kernels.",
        patterns=_re(
            r"Fatal Python error: Illegal instruction",
            r"(?<![\w-])Illegal instruction(?:[ \t]{1,20}\(core dumped\))?[ \t]*\r?$",
            # A shell's job report (bash: "line 3: 123 Illegal instruction (core dumped) python x.py"; zsh).
            r"\d{1,10} (?:Illegal instruction|illegal hardware instruction)\b[^\n]{0,160}",
            r"signal 4[ ,(]{1,3}Illegal instruction[^\n]{0,80}",
            r"trap invalid opcode[^\n]{0,160}",
            r"The TensorFlow library was compiled to use [\w.-]{1,20} instructions, but these aren't available on "
            r"your machine",
            r"exited with code 132\b",
            r"killed by signal: Illegal instruction",
            r"received signal SIGILL\b[^\n]{0,120}",
            r"Signal 4 \(SIGILL\)[^\n]{0,120}",
        ),
        exit_codes=frozenset({132}),
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="jit-compile",
        title="Kernel compilation at run time failed (Triton, torch.compile, DeepSpeed ops, XLA)",
        cause="A kernel compiled at run time could not be built: torch.compile's Inductor or Triton, a C++/CUDA "
        "extension built at first use (DeepSpeed's ops, torch.utils.cpp_extension) or XLA called the C compiler, "
        "nvcc or ptxas, and it failed - the image lacks a compiler, nvcc or the CUDA headers, or its "
        "Triton/ptxas is older than the CUDA or GPU needs.",
        fix="Use an image with matching torch and Triton, a C compiler and the CUDA toolkit of torch's CUDA version "
        "(the official PyTorch *-devel or NGC images); build DeepSpeed's ops into the image (`DS_BUILD_OPS=1 pip "
        "install deepspeed`); for JAX install the CUDA build that brings its own ptxas (`pip install "
        "'jax[cuda12]'`); point TRITON_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR and TORCH_EXTENSIONS_DIR at /data. To "
        "keep training meanwhile, run without torch.compile or set `torch._dynamo.config.suppress_errors = True`.",
        patterns=_re(
            r"BackendCompilerFailed: backend='?\w{1,40}'? raised:?[^\n]{0,200}",
            r"torch\._inductor\.exc\.\w{0,40}(?:CompileError|InductorError)[^\n]{0,200}",
            r"(?:CppCompileError|InductorError): [^\n]{1,200}",
            r"triton\.compiler\.errors\.\w{1,60}Error[^\n]{0,200}",
            r"ptxas(?: \S{1,200})? {0,4}fatal {0,4}: [^\n]{1,200}",
            r"Internal Triton PTX codegen error[^\n]{0,200}",
            r"Triton Error \[CUDA\]: (?!device-side assert|out of memory|an illegal)[^\n]{1,200}",
            r"RuntimeError: Cannot find ptxas[^\n]{0,100}",
            # torch.utils.cpp_extension building an op at first use (DeepSpeed's fused_adam, cpu_adam...).
            # The compiler's own reason first (a CUDA header the image lacks), then the build's summary lines.
            r"fatal error: [\w./-]{1,120}\.(?:h|hpp|cuh): No such file or directory",
            r"Error building extension '[\w.-]{1,80}'[^\n]{0,200}",
            r"^ninja: build stopped: subcommand failed",
            # XLA (JAX, TensorFlow): no ptxas to compile with, or what the driver compiled instead does not load.
            r"No PTX compilation provider is available[^\n]{0,200}",
            r"Failed to load PTX text as a module: [^\n]{1,200}",
        ),
        stage=Stage.ENVIRONMENT,
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
        explain=explain_data_permission,
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="permission-denied",
        title="Permission denied or read-only file system",
        cause="The job was not allowed to write (or run) a file outside its data mount: the container's own file "
        "system and other users' directories are not writable by your job; /data, your data mount, is.",
        fix=WRITE_UNDER_DATA,
        patterns=_re(
            r"(?:PermissionError|OSError|IOError): \[Errno 13\] Permission denied: ['\"]"
            + _NOT_DATA
            + r"(?P<path>[^'\"\n]{1,250})",
            r"(?:OSError|IOError): \[Errno 30\] Read-only file system: ['\"]"
            + _NOT_DATA
            + r"(?P<path>[^'\"\n]{1,250})",
            r"PermissionDeniedError: " + _NOT_DATA + r"(?P<path>[^;:\n]{1,250})[;:] ?Permission denied",
            r"can't open file ['\"]" + _NOT_DATA + r"(?P<path>[^'\"\n]{1,250})['\"]: \[Errno 13\] Permission denied",
            # Shell tools, and the job's own `bash -c` (named gpupool-job) refusing a file.
            r"(?:mkdir|cp|mv|touch|tee|ln|rm|install|bash|sh|zsh|gpupool-job): (?:line \d{1,6}: )?"
            r"(?:(?:cannot|failed to) [a-z ]{1,40})?['\"‘]?"
            + _NOT_DATA
            + r"(?P<path>[^\s:'\"‘’]{1,250})['\"’]?: (?:Permission denied|Read-only file system)",
            r"RuntimeError: File (?P<path>\S{1,250}) cannot be opened\.",
        ),
        explain=explain_permission,
        stage=Stage.ENVIRONMENT,
    ),
    Rule(
        rule_id="no-internet",
        title="No internet on the compute node",
        cause="The job tried to download something (a model or dataset from the Hugging Face Hub, weights from a URL, "
        "packages) but compute nodes cannot reach the internet, and the files were not in the local cache.",
        fix="Download models and datasets before the job into /data (e.g. `huggingface-cli download <repo> "
        "--local-dir /data/models/<name>`), set `HF_HOME=/data/hf-cache` and `HF_HUB_OFFLINE=1` (and "
        "`TRANSFORMERS_OFFLINE=1`) in the Environment field, and load from the local path.",
        patterns=_re(
            r"We couldn't connect to '?https?://[\w.-]{1,100}'? to load this file[^\n]{0,200}",
            r"(?:Connection error, and we cannot find the requested files in the (?:cached path|disk cache)"
            r"|LocalEntryNotFoundError: [^\n]{0,200}(?:connection|Internet))[^\n]{0,200}",
            r"Failed to establish a new connection: \[Errno (?:101|110|111|-2|-3|-5)\][^\n]{0,120}",
            r"Temporary failure in name resolution[^\n]{0,120}",
            r"<urlopen error \[Errno (?:101|110|111|-2|-3|-5)\][^\n]{0,120}",
            r"Could not resolve host: [^\n]{1,120}",
            # Hugging Face datasets' own words for a script or file it could not download.
            r"ConnectionError: Couldn't reach [^\n]{1,200}",
            # Weights & Biases could not reach its server to start the run (a retry line alone may recover).
            r"Run initialization has timed out after [\d.]{1,10} ?sec[^\n]{0,200}",
            r"Could not find a version that satisfies the requirement[^\n]{0,200}(?=[\s\S]{0,2000}?"
            r"(?:NewConnectionError|Network is unreachable|name resolution))",
        ),
        stage=Stage.ENVIRONMENT,
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
        explain=explain_module,
        stage=Stage.ENVIRONMENT,
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
            r"\[Errno 98\] (?i:address already in use)",
            r"(?:bind|listen)(?:\(\))?(?: failed)?: (?i:address already in use)",
            r"code: -98\b[^\n]{0,80}",
            r"The server socket has failed to (?:listen|bind)[^\n]{0,200}?\(errno: 98",
            # Ray's raylet and GCS, whose gRPC server could not take its port.
            r"Failed to start the grpc server\. The specified port is \d{1,5}[^\n]{0,200}",
        ),
        stage=Stage.ENVIRONMENT,
    ),
    # --- program ---------------------------------------------------------------------------------------------
    Rule(
        rule_id="device-assert",
        title="CUDA device-side assert",
        cause="A check inside a GPU kernel failed: most often a class label outside [0, num_classes) given to a loss "
        "function, or an index out of range in an embedding or gather.",
        fix="Check the ranges of labels and indices (e.g. `assert labels.max() < num_classes`, vocabulary size vs. "
        "token ids); rerun with CUDA_LAUNCH_BLOCKING=1, or one batch on the CPU, to get a readable error.",
        patterns=_re(r"device-side assert triggered", r"cudaErrorAssert"),
        stage=Stage.PROGRAM,
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
        stage=Stage.PROGRAM,
    ),
    Rule(
        rule_id="nan-loss",
        title="Loss or gradients became NaN/Inf",
        cause="The loss or the gradients became NaN or infinite, so training cannot go on: usually a learning rate "
        "that is too high, exploding gradients, an invalid operation (a division by zero, the log of zero) or "
        "NaN/Inf in the input data; with fp16, also values too large for half precision.",
        fix="Lower the learning rate (or add warm-up), clip gradients (`torch.nn.utils.clip_grad_norm_(params, "
        "1.0)`), check the data for NaN/Inf, and prefer bf16 to fp16 (A100, H100 and RTX 4090 support it); to find "
        "the operation, rerun with `torch.autograd.set_detect_anomaly(True)` (slow). Resume from a checkpoint "
        "saved before the loss diverged.",
        patterns=_re(
            # Errors that stop the run, in the wordings of PyTorch, Lightning, DeepSpeed, fairseq, Keras, TF, JAX
            # (not their source lines, which a traceback also prints: hence the look-arounds).
            r"Function '(?P<op>\w{1,100})' returned nan values in its \d{1,3}th output",
            r"The total norm of order [\w.-]{1,10} for gradients from `parameters` is non-finite",
            r"ValueError: The loss returned in `training_step` is",
            r"Detected nan and/or inf values in `(?!\{)",
            r"Current(?<![\"']Current) loss scale already at minimum",
            r"Minimum(?<![\"'(]Minimum) loss scale reached",
            r"FloatingPointError: [^\n]{1,200}",
            r"found (?:NaN|Inf) in local (?:grad norm|forward loss)",
            r"Invalid loss, terminating training",
            r"Tensor had (?:NaN|Inf) values",
            r"Monitored metric [^\n]{1,100}? = (?:tensor\()?-?(?:nan|inf)\b[^\n]{0,60}is not finite",
            r"[Ll]oss (?:is|became|becomes|become|went|has become) (?:nan|NaN|inf|Inf|infinite)\b",
            # A loss scaler that is down to a scale of 1 or less (apex, DeepSpeed, fairseq).
            _OVERFLOW + r"[^\n]{0,120}?(?:reducing|setting)(?: loss)?(?: scale)?(?: to)?:? {0,2}(?:to )?" + _TINY_SCALE,
            r"number of nan iterations: {0,10}[1-9]",
        )
        # Logged losses (a dict of the Hugging Face Trainer, a progress bar, Keras): last, as they may recover.
        + _LOGGED_NAN,
        # A loss scaler skipping a step now and then is normal; step after step it is not.
        runs=(Run(re.compile(_OVERFLOW + r"[^\n]{0,80}?(?i:skip)", re.MULTILINE), count=30, within_lines=3),),
        explain=explain_nan,
        # A NaN logged once and then finite losses again: the loss scaler or a skipped batch dealt with it.
        clearable=_LOGGED_NAN,
        cleared_by=_re(r"[Ll]oss['\"]?(?: ?[=:] ?| )(?:tensor\()?-?\d"),
        stage=Stage.PROGRAM,
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
        stage=Stage.PROGRAM,
    ),
    Rule(
        rule_id="python-exception",
        title="The program stopped with an error",
        cause="The program raised an error that none of the known failures explains; on a multi-process job, this "
        "is the first process's own error, and the NCCL errors, timeouts and signals of the others follow from it.",
        fix="Read the traceback that ends at this line: the last frame in your own code is where it failed. Fix "
        "that, and test the fix on a single GPU (GPU count 1) or a few steps before resubmitting.",
        # The last line of an uncaught traceback, not the errors that only report another process's failure.
        patterns=_re(
            r"^(?:\[rank\d{1,6}\]: {0,4})?(?P<exc>(?:[A-Za-z_]\w{0,40}\.){0,8}"
            r"(?!DistBackendError\b|ChildFailedError\b|DistStoreError\b|SignalException\b)[A-Z]\w{0,60}"
            r"(?:Error|Exception))"
            r"(?::(?![^\n]{0,200}?(?:NCCL|[Ww]atchdog|timed out|Timeout|Connection reset|Broken pipe))[^\n]{0,200})?"
            r"[ \t]*\r?$",
        ),
        stage=Stage.PROGRAM,
        fallback=True,
        explain=explain_exception,
    ),
    # --- limit -----------------------------------------------------------------------------------------------
    Rule(
        rule_id="preempted",
        title="Job preempted or requeued",
        cause="Slurm stopped the job to give its GPUs to a higher-priority job (spot/off-peak and free-tier jobs can "
        "be preempted).",
        fix="Save checkpoints often and resume from the last one; enable requeue so the job restarts by itself, or "
        "submit it as a regular (non-spot) job.",
        patterns=_re(
            r"DUE TO PREEMPTION",
            r"CANCELLED AT [\w:.-]{1,40} DUE TO JOB REQUEUE",
            # Lightning 2.x, 1.6-1.9 and older; submitit. A bypassed SIGTERM alone is not enough: scancel sends it.
            r"[Hh]andling auto-requeue signal",
            r"[Rr]equeing job [\w-]{1,40}\.\.\.",
            r"Requeued SLURM job: [\w-]{1,40}",
            r"requeued exp [\w-]{1,40}",
            r"Caught signal \w{1,10} on [^\n]{1,100}: this job is preempted",
        ),
        states=frozenset({"PREEMPTED"}),
        explain=explain_preempted,
        stage=Stage.LIMIT,
    ),
    Rule(
        rule_id="time-limit",
        title="Time limit reached",
        cause="The job ran longer than its time limit and Slurm stopped it.",
        fix="Raise the time limit in the job form (clone the job to keep everything else), and save checkpoints "
        "regularly so a resubmitted job resumes instead of starting over.",
        patterns=_re(
            r"DUE TO TIME LIMIT",
            # submitit's handler of Slurm's warning signal, when the time is (nearly) up.
            r"Caught signal \w{1,10} on [^\n]{1,100}: this job is timed-out",
            r"Job has timed out\. Ran \d{1,7} minutes",
        ),
        states=frozenset({"TIMEOUT", "DEADLINE"}),
        explain=explain_time_limit,
        stage=Stage.LIMIT,
    ),
    # --- consequence -----------------------------------------------------------------------------------------
    Rule(
        rule_id="dist-init",
        title="Distributed process group never formed",
        cause="The processes of the job never all met at the rendezvous: some did not start or crashed before "
        "joining, the world size is larger than the number of processes started, or they looked for the store "
        "at different addresses (MASTER_ADDR/MASTER_PORT), so the others waited until they timed out.",
        fix="Start exactly world-size processes (torchrun's --nnodes x --nproc_per_node must equal the GPUs of the "
        "job); on several nodes set MASTER_ADDR to the first host of `scontrol show hostnames $SLURM_JOB_NODELIST` "
        "and the same MASTER_PORT everywhere; look above for a process that failed before joining and fix that.",
        patterns=_re(
            r"DistStoreError: [^\n]{0,200}",
            r"Timed out after \d{1,7} seconds waiting for (?:clients|workers)[^\n]{0,100}",
            r"RendezvousTimeoutError[^\n]{0,200}",
            r"Timed out initializing process group in store based barrier[^\n]{0,200}",
            r"The client socket has timed out after \d{1,9}m?s while trying to connect to[^\n]{0,200}",
            r"Invalid rank \d{1,6}, rank should be in the interval[^\n]{0,100}",
            r"RuntimeError: Socket Timeout",
            # JAX's coordination service: not every process registered or reached a barrier in time.
            r"DEADLINE_EXCEEDED: Barrier timed out[^\n]{0,200}",
            r"cluster registration failed[^\n]{0,200}",
            r"Coordination service agent in error status: DEADLINE_EXCEEDED[^\n]{0,200}",
        ),
        stage=Stage.CONSEQUENCE,
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
            _NCCL_WARN + r"[^\n]{0,200}?" + _CONNECTION_FAILED + r"[^\n]{0,200}",
            # What torch 2.x repeats under "Last error:" (NCCL 2.18+), without the WARN prefix.
            r"^[ \t]{0,8}(?:\[rank\d{1,6}\]: {0,4})?(?:socket\w{0,20}|Net|NET/\w{1,10}) ?: [^\n]{0,200}?"
            + _CONNECTION_FAILED
            + r"[^\n]{0,200}",
            r"^[ \t]{0,8}(?:\[rank\d{1,6}\]: {0,4})?(?:\[Proxy Service \d{1,6}\] Failed to execute operation Connect"
            r"|Proxy Call to rank \d{1,6} failed)",
            r"Watchdog caught collective operation timeout[^\n]{0,200}",
            _NCCL_WARN + r"[^\n]{0,200}?(?i:timeout|timed out)",
            r"nccl(?:UnhandledCuda|System|Internal|Remote|InvalidUsage|InvalidArgument)Error\b",
            r"NCCL error[^\n]{0,200}",
            r"DistBackendError",
        ),
        explain=explain_nccl,
        stage=Stage.CONSEQUENCE,
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
            # torchrun's summary of a worker that got SIGKILL (the OOM killer, or scancel).
            r"[Ss]ignal 9 \(SIGKILL\) received by PID \d{1,10}",
        ),
        exit_codes=frozenset({137}),
        log_needs_exit_code=frozenset({137, 9, -9}),
        suppressed_by=("host-oom", "time-limit", "node-fail", "preempted"),
        stage=Stage.CONSEQUENCE,
    ),
    # --- wrapper ---------------------------------------------------------------------------------------------
    Rule(
        rule_id="launcher-exit",
        title="A process of the job exited with an error",
        cause="A launcher (torchrun, srun, accelerate, deepspeed) reports that a process it started exited with an "
        "error; the launcher only relays it, and no known failure was recognised in the log before this line.",
        fix="Look above this line for the first error of any rank (a traceback, 'Killed', an out-of-memory) and fix "
        "that; if there is none, the process was killed without a message (often host memory: see the job's "
        "memory use), so rerun with a smaller batch or fewer DataLoader workers.",
        patterns=_re(
            r"Root Cause \(first observed failure\):?[\s\S]{0,400}?(?P<at>exitcode {0,4}: -?\d{1,4}[^\n]{0,100})",
            r"torch\.distributed\.elastic\.multiprocessing\.errors\.ChildFailedError[^\n]{0,200}",
            r"failed \(exitcode: -?\d{1,4}\) local_rank: \d{1,6}[^\n]{0,200}",
            r"srun: error: [\w.-]{1,100}: tasks? [\d,-]{1,40}: Exited with exit code \d{1,3}",
            r"subprocess\.CalledProcessError: Command '\[[^\n]{0,200}(?:torch\.distributed|deepspeed|accelerate)"
            r"[^\n]{0,200}returned non-zero exit status \d{1,3}",
        ),
        stage=Stage.WRAPPER,
        fallback=True,
    ),
)
