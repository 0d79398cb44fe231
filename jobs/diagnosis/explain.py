"""How the log analyser tailors a finding's cause and fix to what matched (see `jobs.diagnosis.diagnose`).

Each function takes the match and its evidence line and returns (cause, fix), or None to keep the rule's
own texts. They read only the matched text and that one line, never the rest of the log.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from django.conf import settings

# (match, evidence line) -> (cause, fix), or None for the rule's own texts.
Explain = Callable[[re.Match[str], str], tuple[str, str] | None]


def _larger_gpus() -> str:
    """The pool's GPU types by memory, largest last (deploy/gpu_types.json)."""
    by_memory = sorted(settings.GPU_TYPES.items(), key=lambda item: item[1]["memory_gb"])
    return ", ".join(f"{name} {info['memory_gb']} GB" for name, info in by_memory)


GPU_MEMORY_HINT = f"request a GPU with more memory ({_larger_gpus()}) or set a higher GPU memory (GB) in the job form"


def explain_image_import(m: re.Match[str], line: str) -> tuple[str, str] | None:
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


def explain_driver(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0).lower()
    need = m.groupdict().get("need")
    cuda = m.groupdict().get("cuda")
    if cuda:
        return (
            f"The image requires CUDA {cuda} or newer, but the NVIDIA driver on the node supports only an older "
            "CUDA, so the container was not started.",
            "Choose a release of the image built for an older CUDA (e.g. a CUDA 12.1 or 11.8 build of "
            "PyTorch/TensorFlow), or clone a job whose image ran on this GPU type.",
        )
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


def explain_missing_lib(m: re.Match[str], line: str) -> tuple[str, str] | None:
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


def explain_module(m: re.Match[str], line: str) -> tuple[str, str] | None:
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


def explain_xid(m: re.Match[str], line: str) -> tuple[str, str] | None:
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


_NCCL_COLLECTIVE_TIMEOUT = (
    "A collective operation (all-reduce, broadcast...) timed out: one rank stopped taking part, usually "
    "because it crashed (look for an earlier error, e.g. out of memory), hung in data loading or ran "
    "a different number of steps.",
    "Find the first error of any rank above this one and fix that; make every rank run the same number "
    "of steps and batches; for slow but healthy steps raise the process group timeout "
    "(`init_process_group(timeout=...)`); set NCCL_DEBUG=INFO to see which rank stalled.",
)


# A peer process went away (crashed, killed) or never listened: its own error is the one to fix.
_NCCL_PEER_GONE = re.compile(
    r"(?i)closed by (?:remote )?peer|closed connection|reset by peer|Broken pipe|Connection refused"
    r"|Socket recv failed|remote process exited|Proxy Call to rank"
)
# The network between the processes did not carry the connection at all.
_NCCL_NETWORK = re.compile(
    r"(?i)timed out|timeout|No route to host|Network is unreachable|Software caused connection abort"
    r"|exceeded (?:error )?retr|Got completion|no (?:socket )?interface found|Cannot assign requested address"
)


def explain_nccl(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    if "Watchdog" in text:
        return _NCCL_COLLECTIVE_TIMEOUT
    if _NCCL_PEER_GONE.search(text):
        return (
            "NCCL lost its connection to another process of the job (or found nobody listening): that process most "
            "likely exited first - it crashed, ran out of memory or was killed - and the others only lost their "
            "connection to it. At start-up, 'Connection refused' can also mean MASTER_ADDR or MASTER_PORT point to "
            "the wrong place.",
            "Look above for the first error of any rank (out of memory, an exception, 'Killed', a segmentation "
            "fault) and fix that one; this message is its consequence. If no rank shows an error, check "
            "MASTER_ADDR/MASTER_PORT (on one node use `torchrun --standalone`) and rerun with NCCL_DEBUG=INFO.",
        )
    if _NCCL_NETWORK.search(text):
        if "Got completion" in text:
            return (
                "The InfiniBand network reported a failed transfer between GPUs of the job (a completion with "
                "an error): a fault of the network link or adapter, not of your code.",
                "Clone the job and resubmit, resuming from your last checkpoint, and tell the admins the node name; "
                "to keep working meanwhile, run on a single node.",
            )
        return (
            "NCCL could not reach another process of the job over the network: the connection timed out, there was "
            "no route, or no usable network interface - a wrong NCCL_SOCKET_IFNAME or other NCCL network setting, "
            "a firewall, or a network fault on the node.",
            "Remove NCCL_SOCKET_IFNAME, NCCL_IB_* and other NCCL network variables from the Environment field "
            "unless the admins gave them to you, make sure MASTER_ADDR is a host of this job, then clone and "
            "resubmit; if it happens again on the same node, tell the admins the node name.",
        )
    if re.search(r"(?i)time(?:d )?out", text):
        return _NCCL_COLLECTIVE_TIMEOUT
    if "UnhandledCuda" in text or "unhandled cuda error" in text:
        return (
            "NCCL hit a CUDA error underneath: the real failure is a CUDA error on one of the GPUs (often out of "
            "memory or a GPU fault).",
            "Look for the CUDA error or Xid before this line and fix that; rerun with NCCL_DEBUG=INFO to see it. "
            "If the job used more GPUs than it needs, try a smaller GPU count to check it runs.",
        )
    return None


def explain_data_permission(m: re.Match[str], line: str) -> tuple[str, str] | None:
    if "Read-only file system" in line:
        return (
            "The job tried to write to a read-only path under /data.",
            "Write outputs and checkpoints to a writable directory of your data mount (the one chosen in the job "
            "form), or set the output path of your script to it.",
        )
    return None


def explain_disk_full(m: re.Match[str], line: str) -> tuple[str, str] | None:
    if "quota" in line.lower() or "Errno 122" in line:
        return (
            "A disk quota was exceeded: the job (or a cache it fills, such as the Hugging Face, pip or Triton "
            "cache under the home directory) wrote more than the quota of that file system allows.",
            "Point caches at /data in the Environment field (`HF_HOME=/data/hf-cache`, `PIP_CACHE_DIR=/data/.pip`, "
            "`TRITON_CACHE_DIR=/data/.triton`, `XDG_CACHE_HOME=/data/.cache`), delete old checkpoints and caches, "
            "or choose a larger NVMe cache (GB) in the job form.",
        )
    if re.search(r"/data\b", line):
        return (
            "The data mount /data (the node's NVMe cache) is full.",
            "Delete old checkpoints and datasets from /data, keep fewer checkpoints (e.g. only the last and the "
            "best), or choose a larger NVMe cache (GB) in the job form if your plan allows.",
        )
    return None


def explain_gpu_oom(m: re.Match[str], line: str) -> tuple[str, str] | None:
    # vLLM and JAX/XLA run out of GPU memory for reasons of their own, with settings of their own to fix it.
    if "cache blocks" in line:
        return (
            "vLLM ran out of GPU memory for its KV cache: after loading the model's weights, the share of GPU "
            "memory vLLM may use (gpu_memory_utilization) left nothing for the cache of the requests.",
            "Let vLLM use more of the GPU (`--gpu-memory-utilization 0.9`, with nothing else on that GPU), lower "
            "`--max-model-len` and `--max-num-seqs`, use a smaller or quantised model, or spread it over several "
            "GPUs (`--tensor-parallel-size`); or " + GPU_MEMORY_HINT + ".",
        )
    if "RESOURCE_EXHAUSTED" in line or "Cuda failure" in line:
        return (
            "The GPU ran out of memory under JAX/XLA (or NCCL could not get GPU memory for its buffers): XLA "
            "reserves 75 % of the GPU's memory when it starts, and the model, its activations and the batch "
            "needed more, or left too little for NCCL.",
            "Lower the batch size or use mixed precision; set `XLA_PYTHON_CLIENT_MEM_FRACTION` (e.g. 0.9) to "
            "give XLA more, or `XLA_PYTHON_CLIENT_PREALLOCATE=false` to leave room for NCCL; or "
            + GPU_MEMORY_HINT
            + ".",
        )
    return None


def explain_arch(m: re.Match[str], line: str) -> tuple[str, str] | None:
    sm = m.groupdict().get("sm")
    if not sm:
        return None
    return (
        f"The framework in the image was not compiled for this GPU's architecture (sm_{sm}): it is too old "
        "for the GPU type the job ran on.",
        "Choose a newer official image (RTX 4090 sm_89 and H100 sm_90 need CUDA 11.8+ builds, e.g. PyTorch 2.x), "
        "or choose a GPU type the image supports.",
    )


WRITE_UNDER_DATA = (
    "Write outputs, checkpoints and logs under /data (your data mount, chosen in the job form) and point caches "
    "there too, in the Environment field of the job form (e.g. `HF_HOME=/data/hf-cache`, "
    "`TORCH_HOME=/data/torch-cache`, `XDG_CACHE_HOME=/data/.cache`, `TMPDIR=/data/tmp`)."
)


def explain_permission(m: re.Match[str], line: str) -> tuple[str, str] | None:
    path = (m.groupdict().get("path") or "").strip("'\"‘’")
    text = m.group(0)
    if "cannot be opened" in text:
        return (
            f"`torch.save` could not create `{path}`: its directory does not exist or the job may not write there.",
            "Create the directory first (`os.makedirs(dirname, exist_ok=True)`) and save under /data, your data "
            "mount. " + WRITE_UNDER_DATA,
        )
    if re.search(r"/(?:site|dist)-packages(?:/|$)", path) or "Could not install packages" in line:
        return (
            "`pip install` tried to write into the image's own Python packages, which the job may not change.",
            "Install packages into the image itself (a Dockerfile `RUN pip install ...`, then choose that image), "
            "or install them for the job only with `pip install --user ...` (or `pip install --target "
            "/data/pylib ...` with `PYTHONPATH=/data/pylib`).",
        )
    if re.search(r"/\.(?:cache|config|triton|local|keras|nv)(?:/|$)|/(?:huggingface|torch/hub)(?:/|$)", path):
        return (
            f"A library tried to write its cache or settings at `{path}`, under a home directory the job may "
            "not write to inside the container.",
            "Point the caches at /data in the Environment field of the job form: `HF_HOME=/data/hf-cache`, "
            "`TORCH_HOME=/data/torch-cache`, `XDG_CACHE_HOME=/data/.cache`, `TRITON_CACHE_DIR=/data/.triton` "
            "(or `HOME=/tmp` for everything at once).",
        )
    if re.search(r"(?:\.sh|\.py)$|^\./", path) and "Permission denied" in text and "Errno" not in text:
        return (
            f"`{path}` is not executable, so the shell refused to run it.",
            f"Run it through its interpreter (`bash {path}` or `python {path}`), or make it executable "
            f"(`chmod +x {path}`) before you build the image or copy it to /data.",
        )
    if "Read-only file system" in text:
        return (
            f"The job tried to write to `{path}`, on a read-only file system: the container's own files (the "
            "image: /workspace, /opt, /usr...) cannot be changed by the job.",
            WRITE_UNDER_DATA,
        )
    return None


ONE_PROCESS_PER_GPU = (
    "Give each process its own GPU: start one process per GPU (`torchrun --nproc_per_node=<GPU count>`) and call "
    "`torch.cuda.set_device(int(os.environ['LOCAL_RANK']))` before any other CUDA call; do not touch CUDA in the "
    "parent process or in DataLoader workers. If a single-process job fails like this, clone and resubmit and "
    "tell the admins the node name (a process may be left over on that GPU)."
)


def explain_device_ordinal(m: re.Match[str], line: str) -> tuple[str, str] | None:
    """`mig-unsupported`'s "invalid device ordinal": more processes, or a higher GPU index, than GPUs seen."""
    if not re.search(r"invalid device ordinal|cudaErrorInvalidDevice|CUDA_ERROR_INVALID_DEVICE\b", m.group(0)):
        return None
    return (
        "A process asked for a GPU index the job does not have: a job sees only its own GPUs, numbered from 0 to "
        "(GPU count - 1), and each MIG slice shows as a single GPU 0 to its process; more processes than GPUs were "
        "started, or a global rank or a fixed index (e.g. `cuda:3`) was used as the GPU number.",
        "Start one process per GPU of the job (`torchrun --nproc_per_node=<GPU count>`), select the GPU with the "
        "local rank (`torch.cuda.set_device(int(os.environ['LOCAL_RANK']))`), and do not hard-code GPU indices; on "
        "a MIG slice run one process on `cuda:0`. Raise the GPU count in the job form if the script needs more "
        "GPUs (a full-GPU type for multi-GPU training).",
    )


def explain_gpu_unavailable(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    # Only the set_device pattern matches an out of memory: the GPU was full before this process used it.
    if "out of memory" in text:
        return (
            "The GPU was already full when this process selected it, before your model was loaded: another process "
            "holds that GPU's memory, usually another process of the same job placed on the same GPU.",
            ONE_PROCESS_PER_GPU,
        )
    if re.search(r"unknown error|CUDA_ERROR_UNKNOWN|Error 802|not yet initialized|GPU is lost|Unknown Error", text):
        return (
            "CUDA could not initialise the GPU the job was given: the GPU or its driver on that node is in a bad "
            "state (it may need a reset), the GPU fabric manager is not running, or the script changed "
            "CUDA_VISIBLE_DEVICES after CUDA had started.",
            "Do not change CUDA_VISIBLE_DEVICES inside the script; otherwise clone the job and resubmit (it will "
            "likely get another GPU) and tell the admins the node name - your code does not cause this.",
        )
    return None


def explain_container_start(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    if "nsenter" in text or "namespace" in text:
        return (
            "Enroot could not create the container's namespaces on the node, so the container never started: a "
            "configuration problem of the node, not of your image or command.",
            "Clone the job and resubmit (it may land on another node) and tell the admins the node name and this line.",
        )
    if "nvidia" in text.lower():
        return (
            "The hook that gives the container its GPUs (nvidia-container-cli) failed, so the container never "
            "started: the NVIDIA driver on the node is not usable, or the image asks for something the node cannot "
            "give (its NVIDIA_* settings).",
            "Clone the job and resubmit (another node may work). If an official PyTorch/TensorFlow image fails the "
            "same way, tell the admins the node name; if only your image fails, rebuild it from an official one "
            "without changing NVIDIA_VISIBLE_DEVICES, NVIDIA_DRIVER_CAPABILITIES or NVIDIA_REQUIRE_CUDA.",
        )
    if "switchroot" in text or "failed to execute" in text:
        return (
            "The container was created but the command could not start in it: the image has no `bash` (the portal "
            "runs your command with `bash -c`) or its entrypoint does not run commands.",
            "Choose an image that contains bash (the official PyTorch, TensorFlow and NGC images do), or build one "
            "FROM your image that adds bash and has no unusual ENTRYPOINT.",
        )
    return None


def explain_nan(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    op = m.groupdict().get("op")
    if op:
        return (
            f"Autograd anomaly detection found NaN in the gradient of `{op}`: an operation of the model produced "
            "NaN on the backward pass (a division by zero, the log or square root of zero or of a negative number, "
            "or an overflow).",
            "Look at the forward code of that operation (the 'Error detected in ...' traceback above shows where it "
            "is called): add an epsilon to divisions and logs (`torch.log(x + 1e-8)`), clamp the inputs, use stable "
            "forms (`log_softmax`, `BCEWithLogitsLoss`), and lower the learning rate; turn anomaly detection off "
            "again afterwards, it slows training.",
        )
    if re.search(r"(?i)scale|overflow", text):
        return (
            "Mixed-precision (fp16) training found NaN/Inf gradients at step after step: the loss scaler skipped "
            "the updates and lowered the loss scale to (almost) nothing, so the model stopped learning. The loss "
            "or the gradients are not finite at all, not just too large for fp16.",
            "Use bf16 instead of fp16 (A100, H100 and RTX 4090 support it: `torch.autocast('cuda', "
            "dtype=torch.bfloat16)`, `--bf16`, `precision='bf16-mixed'`), lower the learning rate or add warm-up, "
            "clip gradients, and check the data for NaN/Inf; resume from a checkpoint saved before the loss "
            "diverged.",
        )
    return None


def explain_preempted(m: re.Match[str], line: str) -> tuple[str, str] | None:
    text = m.group(0)
    if "JOB REQUEUE" in text:
        return (
            "Slurm stopped the job and put it back in the queue (requeue): it was preempted by a higher-priority "
            "job, or it was requeued on purpose (by its launcher or an admin). When it gets GPUs again it starts "
            "your command from the beginning.",
            "Make the script resume from its last checkpoint (it starts again from the top) and save checkpoints "
            "often, under /data; if it is requeued again and again, submit it as a regular (non-spot) job.",
        )
    if re.search(r"(?i)auto-requeue|SIGUSR1|requeing|Requeued SLURM job|requeued exp", text):
        return (
            "PyTorch Lightning received Slurm's advance warning, saved a checkpoint (hpc_ckpt_*.ckpt) and requeued "
            "the job: it was about to reach its time limit or to be preempted. When it runs again it resumes from "
            "that checkpoint.",
            "Nothing to fix while the requeued job resumes: keep the checkpoint directory (default_root_dir) under "
            "/data so the checkpoint survives. If it keeps being requeued near the time limit, raise the time limit "
            "in the job form.",
        )
    if "this job is preempted" in text:
        return (
            "submitit received Slurm's preemption signal, checkpointed the job and requeued it: a higher-priority "
            "job needed its GPUs. When it runs again it resumes from that checkpoint.",
            "Nothing to fix while the requeued job resumes; keep the checkpoint folder under /data. If it is "
            "preempted again and again, submit it as a regular (non-spot) job.",
        )
    return None


def explain_time_limit(m: re.Match[str], line: str) -> tuple[str, str] | None:
    if "timed-out" in m.group(0) or "timed out. Ran" in m.group(0):
        return (
            "The job reached (almost) its time limit: submitit caught Slurm's warning signal, checkpointed and "
            "requeued it, so it continues from the checkpoint when it runs again.",
            "Raise the time limit in the job form (clone the job to keep everything else) if it should finish in "
            "one go; keep the checkpoint folder under /data so the requeued job can resume.",
        )
    return None


def explain_glibc(m: re.Match[str], line: str) -> tuple[str, str] | None:
    sym = m.group("sym")
    by = (m.groupdict().get("by") or "").strip()
    what = f"`{by}`" if by else "A compiled program or extension"
    library = "glibc (the C library)" if sym.startswith("GLIBC_") else "libstdc++ (the C++ runtime)"
    return (
        f"{what} needs {sym} of {library}, which the image's version does not have: it was built on a newer "
        "system (or with a newer compiler) than the image.",
        "Use an image with a newer base (e.g. an Ubuntu 22.04+ official PyTorch/NGC image), install a build of the "
        "package made for this image (its manylinux wheel; in conda, `conda install libstdcxx-ng` in the same "
        "environment), or compile it inside the image; do not copy binaries built on another machine.",
    )


# Exceptions whose name says what to do, for the catch-all finding of an uncaught error.
_EXCEPTION_HINTS = {
    "FileNotFoundError": "a path that does not exist in the job: inputs must be under /data (your data mount) or "
    "in the image, and relative paths start from the job's working directory",
    "KeyError": "a key missing in a dict or a state_dict: check the checkpoint or config matches the code",
    "AssertionError": "an `assert` in the code failed: its line above says which condition",
}


def explain_exception(m: re.Match[str], line: str) -> tuple[str, str] | None:
    exc = m.group("exc").rsplit(".", 1)[-1]
    hint = _EXCEPTION_HINTS.get(exc)
    if hint is None:
        return None
    return (
        f"The program stopped with an uncaught {exc}: {hint}. On a multi-process job, this is the first "
        "process's own error; the NCCL errors, timeouts and signals of the others follow from it.",
        "Read the traceback that ends at this line: the last frame in your own code is where it failed. Fix that, "
        "and test the fix on a single GPU (GPU count 1) or a few steps before resubmitting.",
    )
