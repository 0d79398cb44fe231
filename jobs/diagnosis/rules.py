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

from jobs.diagnosis.explain import (
    GPU_MEMORY_HINT,
    ONE_PROCESS_PER_GPU,
    WRITE_UNDER_DATA,
    Explain,
    explain_arch,
    explain_container_start,
    explain_data_permission,
    explain_disk_full,
    explain_driver,
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
# Where a job may not write: the paths of the generic permission rule leave /data to `data-permission`.
_NOT_DATA = r"(?!/data\b)"


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
            # The first "enroot-" of a line, atomically, so a line of many costs one scan.
            r"^(?>[^\n]{0,200}?enroot-)(?!mount\b|nsenter\b|switchroot\b)[\w.-]{1,40}:[^\n]{0,200}?No such file",
            r"\[ERROR\] No such file or directory:",
            r"pyxis: failed to import docker image",
        ),
        explain=explain_image_import,
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
        suppressed_by=("container-mount", "image-import", "driver-mismatch"),
        explain=explain_container_start,
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
        explain=explain_arch,
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
            r"(?P<at>[^\n]{0,60}?Error: CUDA error: (?!no CUDA-capable|CUDA driver version)[^\n]{1,200})",
            r"all CUDA-capable devices are busy or unavailable",
            r"CUDA-capable device\(s\) is/are busy or unavailable",
            r"cudaErrorDevicesUnavailable",
            r"CUDA_ERROR_DEVICE_UNAVAILABLE",
            r"invalid device ordinal",
            r"cudaErrorInvalidDevice\b",
            r"CUDA_ERROR_INVALID_DEVICE\b",
            r"CUDA unknown error - this may be due to an incorrectly set up environment",
            r"Error 802: system not yet initialized",
            r"failed call to cuInit: CUDA_ERROR_UNKNOWN",
            r"Unable to determine the device handle for GPU[^\n]{0,60}: (?:Unknown Error|GPU is lost)",
        ),
        explain=explain_gpu_unavailable,
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
        explain=explain_missing_lib,
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
    ),
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
        explain=explain_xid,
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
            # Logged losses (a dict of the Hugging Face Trainer, a progress bar, Keras, Megatron's counter).
            r"loss['\"]: ?(?:nan|NaN|-?inf|-?Infinity)\b",
            r"[Ll]oss(?:_(?:step|epoch|avg|mean))?(?: ?[=:] ?| )"
            r"(?:tensor\()?-?(?:nan|NaN|inf|Inf)\b(?![\w.])",
            r"number of nan iterations: {0,10}[1-9]",
        ),
        # A loss scaler skipping a step now and then is normal; step after step it is not.
        runs=(Run(re.compile(_OVERFLOW + r"[^\n]{0,80}?(?i:skip)", re.MULTILINE), count=30, within_lines=3),),
        explain=explain_nan,
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
        explain=explain_disk_full,
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
