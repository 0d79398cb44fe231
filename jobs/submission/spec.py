"""A job spec from untrusted input (API JSON or form data), parsed and checked.

`parse_job_spec` turns what a user sent into a `JobSpec` or raises one `SpecError`
that lists every problem by field, so an API user or a form sees all of them at once.
Nothing here talks to Slurm; `jobs.submission.batch_script` turns a `JobSpec` into the script
Slurm runs, and the caller turns `JobSpec.gpu.tres_per_node()` into the submission.

What is checked (docs/product.md, "Jobs" and "Plans"):
- images are registry references pinned by a tag or a sha256 digest, never `latest`;
  production may demand a digest; the free plan only gets the official images; with an image
  catalogue (foundation/images.py, IMAGE_CATALOGUE_ONLY) only its images, each on its plans;
- the GPU type exists and is on the user's plan; whole GPUs (1 .. GPUs of that type
  on one node) or GPU memory, mapped to shards of ONE GPU (Slurm never starts a shard
  request larger than one GPU's shards);
- the time limit is within the plan's maximum;
- the NVMe cache (`nvme_gb`, GB on the job's node, 0 for none) is at most NVME_MAX_GB (the
  largest node's); Slurm holds it as the count-only GRES `gres/nvme` and accounts for it;
- the data mount is a normalised path under one of the data roots;
- environment variables have plain names, none that steers Slurm, the container
  runtime, the dynamic linker or the portal itself.

The concurrent GPU quota (how many GPUs a user may hold at once) is not checked here:
it depends on the user's running jobs, and over quota is a 403, not a bad spec.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cluster.records.gres import build_tres_per_node
from foundation.gpu_types import GpuType, gpu_types_from_mapping
from foundation.images import ImageCatalogue, canonical_repository
from plans.catalog import PlanSnapshot as Plan

DEFAULT_OFFICIAL_IMAGES = (
    "nvcr.io/nvidia/pytorch",
    "nvcr.io/nvidia/tensorflow",
    "pytorch/pytorch",
    "tensorflow/tensorflow",
)
DEFAULT_DATA_MOUNT_ROOTS = ("/mnt/nvme",)

# Input field names; `csrfmiddlewaretoken` is what Django forms add and is ignored.
FIELDS = (
    "name",
    "image",
    "gpu_type",
    "gpu_count",
    "gpu_memory_gb",
    "nvme_gb",
    "command",
    "time_limit_minutes",
    "data_mount",
    "environment",
    "spot",
    "datasets",
)
IGNORED_FIELDS = frozenset({"csrfmiddlewaretoken"})
MAX_UNKNOWN_FIELDS_REPORTED = 20

NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,64}")
DEFAULT_NAME = "job"

# --- Image references ---------------------------------------------------------------
# The Docker/OCI reference grammar (distribution/reference), restricted: ASCII only,
# lowercase repository path, digests only sha256 with 64 lowercase hex digits.
MAX_IMAGE_CHARS = 300  # jobs.models.Job.image
_DOMAIN_COMPONENT = r"(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]*[A-Za-z0-9])"
_DOMAIN = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]{{1,5}})?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_TAG = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}"
_DIGEST = r"sha256:[0-9a-f]{64}"
IMAGE_RE = re.compile(
    rf"(?P<repository>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?"
    rf"(?:@(?P<digest>{_DIGEST}))?",
    re.ASCII,
)
_IMAGE_FORBIDDEN_RE = re.compile(r"[\s\"'`\\$;|&<>(){}\[\]*?!~^#%,\x00-\x1f\x7f-\x9f]")

# --- Data mounts ----------------------------------------------------------------------
MAX_PATH_CHARS = 1024
_PATH_CHARS_RE = re.compile(r"[A-Za-z0-9._/-]+", re.ASCII)

# --- Datasets ----------------------------------------------------------------------------
# Dataset versions a job mounts at /data/<name> (whose they are is checked by
# jobs.submission.datasets, which needs the user).
MAX_DATASETS = 8

# --- Environment ------------------------------------------------------------------------
ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}", re.ASCII)
MAX_ENV_VALUE_BYTES = 4096
# Names that steer Slurm, the GPU binding, the dynamic linker, the shell that runs the
# job script, the container runtime or the portal's own script: never the user's.
RESERVED_ENV_NAMES = frozenset(
    {
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "LD_PRELOAD",
        "LD_LIBRARY_PATH",
        "PATH",
        "BASH_ENV",
        "ENV",
        "SHELLOPTS",
        "BASHOPTS",
        "IFS",
    }
)
RESERVED_ENV_PREFIXES = ("SLURM_", "SLURMD_", "GPUPOOL_", "ENROOT_", "PYXIS_", "LD_", "BASH_FUNC_", "CUDA_MPS_")

# Integers beyond this many digits are refused before conversion (they are out of range anyway).
_MAX_INT_DIGITS = 18
_DIGITS_RE = re.compile(r"[0-9]+", re.ASCII)


# The spec's name for a GPU type (foundation/gpu_types.py): memory, most per node, shards per GPU.
GpuTypeInfo = GpuType


@dataclass(frozen=True)
class SpecPolicy:
    gpu_types: dict[str, GpuTypeInfo]
    official_images: tuple[str, ...]
    require_digest: bool
    data_roots: tuple[str, ...]
    max_command_bytes: int = 65536
    max_env_vars: int = 64
    # The most NVMe cache a job may ask for, in GB (0: the pool has none).
    max_nvme_gb: int = 0
    # The pool's images (None: no catalogue, any pinned reference under official_images).
    images: ImageCatalogue | None = None
    # Only catalogue images (the nodes hold no other); off: others under official_images.
    catalogue_only: bool = False

    @classmethod
    def from_settings(cls) -> SpecPolicy:
        """The deployment's policy: GPU_TYPES, OFFICIAL_IMAGES, REQUIRE_IMAGE_DIGEST, DATA_MOUNT_ROOTS.

        GPU_TYPES is always set (from GPU_TYPES_FILE); other missing settings fall back to the
        dev cluster's values (and a digest is then required unless DEBUG); malformed ones stop
        with ImproperlyConfigured.
        """
        from django.conf import settings
        from django.core.exceptions import ImproperlyConfigured

        # Checked at start-up already (settings load the file); checked again because tests and
        # callers may override settings.GPU_TYPES.
        gpu_types = dict(gpu_types_from_mapping(settings.GPU_TYPES))

        roots = tuple(getattr(settings, "DATA_MOUNT_ROOTS", DEFAULT_DATA_MOUNT_ROOTS))
        for root in roots:
            if not _is_clean_absolute_path(root) or root == "/":
                raise ImproperlyConfigured(f"DATA_MOUNT_ROOTS: {root!r} is not a normalised absolute directory")
        official = tuple(getattr(settings, "OFFICIAL_IMAGES", DEFAULT_OFFICIAL_IMAGES))
        require_digest = getattr(settings, "REQUIRE_IMAGE_DIGEST", not settings.DEBUG)
        return cls(
            gpu_types=gpu_types,
            official_images=official,
            require_digest=bool(require_digest),
            data_roots=roots,
            max_nvme_gb=int(getattr(settings, "NVME_MAX_GB", 0)),
            images=getattr(settings, "IMAGE_CATALOGUE", None),
            catalogue_only=bool(getattr(settings, "IMAGE_CATALOGUE_ONLY", False)),
        )


@dataclass(frozen=True)
class GpuRequest:
    """What the job holds on its node: whole GPUs or GPU memory (shards), and NVMe cache."""

    gpu_type: str
    count: int = 0
    memory_gb: int = 0
    shards: int = 0
    nvme_gb: int = 0
    # The NVMe the job's dataset versions take on its node (whole GB, rounded up): added to
    # `nvme_gb` in the request, so Slurm places, limits and accounts for both as gres/nvme.
    # Not an input: jobs.submission.datasets sets it from the versions' sizes.
    dataset_gb: int = 0

    def tres_per_node(self) -> str:
        """Slurm's `tres_per_node` (cluster.records.gres.build_tres_per_node): "gres/gpu:a100:2" for
        whole GPUs, "gres/shard:a100:3" for memory, then ",gres/nvme:500" for an NVMe cache
        (scratch plus the datasets' GB)."""
        return build_tres_per_node(
            self.gpu_type, gpus=self.count, shards=self.shards, nvme_gb=self.nvme_gb + self.dataset_gb
        )

    @property
    def quota_gpus(self) -> int:
        """Whole GPUs this request counts against the concurrent quota (a shard request counts as one)."""
        return self.count if self.count > 0 else 1


@dataclass(frozen=True)
class JobSpec:
    name: str
    image: str
    gpu: GpuRequest
    command: str
    time_limit_minutes: int
    data_mount: str
    environment: dict[str, str] = field(default_factory=dict)
    # A spot job: preemptible by every plan's jobs (SIGTERM, then the grace time, then requeued),
    # priced by time window (plans/spot.py); it does not count against the plan's GPU quota.
    spot: bool = False
    # Dataset version ids, each mounted read-only at /data/<its dataset's name>.
    datasets: tuple[int, ...] = ()

    def to_dict(self) -> dict:
        """The input field names and values: `parse_job_spec(spec.to_dict(), ...)` gives the spec back."""
        data: dict[str, Any] = {
            "name": self.name,
            "image": self.image,
            "gpu_type": self.gpu.gpu_type,
            "command": self.command,
            "time_limit_minutes": self.time_limit_minutes,
            "data_mount": self.data_mount,
            "environment": dict(self.environment),
        }
        if self.gpu.count > 0:
            data["gpu_count"] = self.gpu.count
        else:
            data["gpu_memory_gb"] = self.gpu.memory_gb
        if self.gpu.nvme_gb:
            data["nvme_gb"] = self.gpu.nvme_gb
        if self.spot:
            data["spot"] = True
        if self.datasets:
            data["datasets"] = list(self.datasets)
        return data


class SpecError(Exception):
    """Everything wrong with a spec: field name -> messages."""

    def __init__(self, errors: dict[str, list[str]]):
        self.errors = {name: list(messages) for name, messages in errors.items()}
        super().__init__(self.summary())

    def summary(self) -> str:
        return "; ".join(f"{name}: {' '.join(messages)}" for name, messages in self.errors.items())

    def __str__(self) -> str:
        return self.summary()


def is_reserved_env_name(name: str) -> bool:
    return name in RESERVED_ENV_NAMES or name.startswith(RESERVED_ENV_PREFIXES)


def plan_max_time_minutes(plan: Plan) -> int:
    return plan.max_job_minutes


def parse_job_spec(data: Mapping[str, Any], *, plan: Plan, policy: SpecPolicy) -> JobSpec:
    """Check every field of `data`; return the spec, or raise one SpecError listing all problems."""
    if not isinstance(data, Mapping):
        raise SpecError({"non_field_errors": ["expected an object with the job's fields"]})
    errors: dict[str, list[str]] = {}

    def error(field_name: str, message: str) -> None:
        errors.setdefault(field_name, []).append(message)

    unknown = [key for key in data if key not in FIELDS and key not in IGNORED_FIELDS]
    for key in unknown[:MAX_UNKNOWN_FIELDS_REPORTED]:
        error(str(key)[:64], "unknown field")
    if len(unknown) > MAX_UNKNOWN_FIELDS_REPORTED:
        error(
            "non_field_errors", f"{len(unknown)} unknown fields (only the first {MAX_UNKNOWN_FIELDS_REPORTED} listed)"
        )

    name = _parse_name(data.get("name"), error)
    image = _parse_image(data.get("image"), plan, policy, error)
    gpu = _parse_gpu(data, plan, policy, error)
    nvme_gb = _parse_nvme(data.get("nvme_gb"), policy, error)
    if gpu is not None and nvme_gb:
        gpu = replace(gpu, nvme_gb=nvme_gb)
    command = _parse_command(data.get("command"), policy, error)
    maximum = plan_max_time_minutes(plan)
    time_limit = _parse_int(
        data.get("time_limit_minutes"),
        "time_limit_minutes",
        error,
        1,
        maximum,
        unit=f"minutes (the maximum of your plan, {plan.name})",
    )
    data_mount = _parse_data_mount(data.get("data_mount"), policy, error)
    environment = _parse_environment(data.get("environment"), policy, error)
    spot = _parse_spot(data.get("spot"), plan, error)
    datasets = _parse_datasets(data.get("datasets"), error)
    if datasets and data_mount:
        error("data_mount", "Datasets are mounted under /data; leave the data mount empty when you choose datasets.")

    if errors:
        raise SpecError(errors)
    assert name is not None and image is not None and gpu is not None
    assert command is not None and time_limit is not None and data_mount is not None and environment is not None
    return JobSpec(
        name=name,
        image=image,
        gpu=gpu,
        command=command,
        time_limit_minutes=time_limit,
        data_mount=data_mount,
        environment=environment,
        spot=spot,
        datasets=datasets,
    )


def job_spec_from_dict(data: Mapping[str, Any], *, policy: SpecPolicy | None = None) -> JobSpec:
    """A stored spec (`JobSpec.to_dict()`, checked by `parse_job_spec` when it was submitted) as a JobSpec.

    Plan rules are not applied again (the plan may have changed since); the shape is
    checked and shards are computed from the policy's GPU types. Raises ValueError for a
    dict that `to_dict` could not have written.
    """
    policy = policy or SpecPolicy.from_settings()
    if not isinstance(data, Mapping):
        raise ValueError("a stored job spec must be an object")

    def text(key: str, default: str | None = None) -> str:
        value = data.get(key, default)
        if not isinstance(value, str):
            raise ValueError(f"stored job spec: {key} must be a string")
        return value

    def number(key: str) -> int:
        value = data.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"stored job spec: {key} must be a positive integer")
        return value

    gpu_type = text("gpu_type")
    info = policy.gpu_types.get(gpu_type)
    if info is None:
        raise ValueError(f"stored job spec: unknown GPU type {gpu_type!r}")
    if ("gpu_count" in data) == ("gpu_memory_gb" in data):
        raise ValueError("stored job spec: needs exactly one of gpu_count and gpu_memory_gb")
    nvme_gb = data.get("nvme_gb", 0)
    if isinstance(nvme_gb, bool) or not isinstance(nvme_gb, int) or nvme_gb < 0:
        raise ValueError("stored job spec: nvme_gb must be a whole number, 0 or more")
    if "gpu_count" in data:
        gpu = GpuRequest(gpu_type=gpu_type, count=number("gpu_count"), nvme_gb=nvme_gb)
    else:
        memory = number("gpu_memory_gb")
        gpu = GpuRequest(gpu_type=gpu_type, memory_gb=memory, shards=info.shards_for(memory), nvme_gb=nvme_gb)
    environment = data.get("environment") or {}
    if not isinstance(environment, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in environment.items()
    ):
        raise ValueError("stored job spec: environment must map names to strings")
    return JobSpec(
        name=text("name", DEFAULT_NAME),
        image=text("image"),
        gpu=gpu,
        command=text("command"),
        time_limit_minutes=number("time_limit_minutes"),
        data_mount=text("data_mount", ""),
        environment=dict(environment),
        spot=data.get("spot") is True,
        datasets=_stored_datasets(data.get("datasets", [])),
    )


def _stored_datasets(value: Any) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(isinstance(item, int) and not isinstance(item, bool) for item in value):
        raise ValueError("stored job spec: datasets must be a list of version ids")
    return tuple(value)


# --- Fields ------------------------------------------------------------------------------


def _parse_spot(value: Any, plan: Plan, error) -> bool:
    """true/false (JSON), or the form's "on"/"1"/"true"; absent is false."""
    if _absent(value) or value is False or value in ("0", "false", "off"):
        return False
    if value not in (True, "1", "true", "on"):
        error("spot", "must be true or false")
        return False
    if not plan.allows_spot:
        error("spot", f"Your plan ({plan.name}) does not include spot jobs; they come with the paid plans.")
        return False
    return True


def _parse_datasets(value: Any, error) -> tuple[int, ...]:
    """Version ids: a JSON list of integers, or the form's list of digit strings; absent is none."""
    if _absent(value) or value == []:
        return ()
    if isinstance(value, str | int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list | tuple):
        error("datasets", "must be a list of dataset version ids")
        return ()
    if len(value) > MAX_DATASETS:
        error("datasets", f"at most {MAX_DATASETS} dataset versions per job")
        return ()
    ids: list[int] = []
    for item in value:
        if isinstance(item, str) and _DIGITS_RE.fullmatch(item) and len(item) <= _MAX_INT_DIGITS:
            item = int(item)
        if isinstance(item, bool) or not isinstance(item, int) or not 1 <= item < 2**53:
            error("datasets", "each must be a dataset version id (a positive whole number)")
            return ()
        if item in ids:
            error("datasets", f"version {item} is listed twice")
            return ()
        ids.append(item)
    return tuple(ids)


def _absent(value: Any) -> bool:
    return value is None or value == ""


def _utf8_len(value: str) -> int | None:
    """Bytes of `value` in UTF-8, or None when it cannot be encoded (lone surrogates)."""
    try:
        return len(value.encode("utf-8"))
    except UnicodeEncodeError:
        return None


def _parse_name(value: Any, error) -> str | None:
    if _absent(value):
        return DEFAULT_NAME
    if not isinstance(value, str):
        error("name", "must be a string")
        return None
    if not NAME_RE.fullmatch(value) or not value.isascii():
        error("name", "use 1-64 letters, digits, dots, underscores or hyphens")
        return None
    return value


def _parse_image(value: Any, plan: Plan, policy: SpecPolicy, error) -> str | None:
    if _absent(value):
        error("image", "This field is required.")
        return None
    if not isinstance(value, str):
        error("image", "must be a string")
        return None
    if len(value) > MAX_IMAGE_CHARS:
        error("image", f"at most {MAX_IMAGE_CHARS} characters")
        return None
    if _IMAGE_FORBIDDEN_RE.search(value) or not value.isascii():
        error("image", "must not contain whitespace, quotes, shell characters or control characters")
        return None
    match = IMAGE_RE.fullmatch(value)
    if not match:
        error("image", "not an image reference: use [registry/]repository:tag or repository@sha256:<64 hex digits>")
        return None
    tag, digest = match["tag"], match["digest"]
    ok = True
    if tag is not None and tag.lower() == "latest":
        error("image", "pin a version or a sha256 digest; latest is never allowed")
        ok = False
    elif tag is None and digest is None:
        error("image", "pin a version (repository:tag) or a sha256 digest (repository@sha256:...)")
        ok = False
    if policy.require_digest and digest is None:
        error("image", "images must be pinned by digest here: repository@sha256:<64 hex digits>")
        ok = False
    if ok and policy.images is not None:
        listed, problem = policy.images.find(match["repository"], tag, digest)
        if listed is not None and problem == "digest-mismatch":
            error("image", f"{listed.reference} is pinned at {listed.digest} in the image catalogue, not {digest}")
            return None
        if listed is not None:
            if not listed.allows(plan.code):
                allowed = _allowed_images(policy, plan)
                error("image", f"{listed.reference} is not available on your plan ({plan.name}); it may use: {allowed}")
                return None
            return value
        if policy.catalogue_only:
            allowed = _allowed_images(policy, plan)
            error(
                "image",
                f"{value} is not in the pool's image catalogue (the nodes hold no other image); "
                f"your plan ({plan.name}) may use: {allowed}",
            )
            return None
    if plan.official_images_only:
        official = {canonical_repository(repo) for repo in policy.official_images}
        if canonical_repository(match["repository"]) not in official:
            allowed = ", ".join(policy.official_images) or "none"
            error("image", f"your plan ({plan.name}) may only use the official images: {allowed}")
            ok = False
    return value if ok else None


def _allowed_images(policy: SpecPolicy, plan: Plan) -> str:
    """The catalogue images the plan may use, as a refusal names them."""
    return ", ".join(image.reference for image in policy.images.for_plan(plan.code)) or "none"


def _parse_gpu(data: Mapping[str, Any], plan: Plan, policy: SpecPolicy, error) -> GpuRequest | None:
    gpu_type = data.get("gpu_type")
    info: GpuTypeInfo | None = None
    if _absent(gpu_type):
        error("gpu_type", "This field is required.")
    elif not isinstance(gpu_type, str):
        error("gpu_type", "must be a string")
    elif gpu_type not in policy.gpu_types:
        shown = gpu_type if len(gpu_type) <= 32 and gpu_type.isprintable() else "this"
        error("gpu_type", f"unknown GPU type {shown!r}; choose one of: {', '.join(sorted(policy.gpu_types))}")
    elif plan.gpu_quota.get(gpu_type, 0) <= 0:
        available = ", ".join(sorted(t for t, n in plan.gpu_quota.items() if n > 0)) or "none"
        error("gpu_type", f"{gpu_type} is not available on your plan ({plan.name}); available: {available}")
    else:
        info = policy.gpu_types[gpu_type]

    raw_count, raw_memory = data.get("gpu_count"), data.get("gpu_memory_gb")
    if not _absent(raw_count) and not _absent(raw_memory):
        message = "give either gpu_count (whole GPUs) or gpu_memory_gb (GPU memory), not both"
        error("gpu_count", message)
        error("gpu_memory_gb", message)
        return None
    if _absent(raw_count) and _absent(raw_memory):
        error("gpu_count", "give gpu_count (whole GPUs) or gpu_memory_gb (GPU memory)")
        return None
    if not _absent(raw_count):
        maximum = info.per_node if info else None
        count = _parse_int(raw_count, "gpu_count", error, 1, maximum, unit=f"{info.name} GPUs" if info else "")
        if info is None or count is None:
            return None
        return GpuRequest(gpu_type=info.name, count=count)
    maximum = info.memory_gb if info else None
    memory = _parse_int(
        raw_memory, "gpu_memory_gb", error, 1, maximum, unit=f"GB (the memory of one {info.name})" if info else ""
    )
    if info is None or memory is None:
        return None
    return GpuRequest(gpu_type=info.name, memory_gb=memory, shards=info.shards_for(memory))


def _parse_int(
    value: Any, field_name: str, error, minimum: int, maximum: int | None, *, required: bool = True, unit: str = ""
) -> int | None:
    """A whole number from JSON (int) or a form (a string of ASCII digits); no bools, floats or signs."""
    if _absent(value):
        if required:
            error(field_name, "This field is required.")
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        error(field_name, "must be a whole number")
        return None
    if isinstance(value, str):
        if not _DIGITS_RE.fullmatch(value):
            error(field_name, "must be a whole number")
            return None
        if len(value.lstrip("0")) > _MAX_INT_DIGITS:
            value = 10**_MAX_INT_DIGITS  # out of range, reported below
        else:
            value = int(value)
    suffix = f" {unit}" if unit else ""
    if value < minimum or (maximum is not None and value > maximum):
        if maximum is None:
            error(field_name, f"must be at least {minimum}{suffix}")
        else:
            error(field_name, f"must be between {minimum} and {maximum}{suffix}")
        return None
    return value


def _parse_nvme(value: Any, policy: SpecPolicy, error) -> int:
    """GB of NVMe cache on the job's node; absent or empty means none."""
    if _absent(value):
        return 0
    unit = "GB (the most one node has)" if policy.max_nvme_gb else "GB (this pool has no NVMe cache)"
    return _parse_int(value, "nvme_gb", error, 0, policy.max_nvme_gb, unit=unit) or 0


def _parse_command(value: Any, policy: SpecPolicy, error) -> str | None:
    if value is None:
        error("command", "This field is required.")
        return None
    if not isinstance(value, str):
        error("command", "must be a string")
        return None
    if not value.strip():
        error("command", "This field is required.")
        return None
    if "\x00" in value:
        error("command", "must not contain NUL characters")
        return None
    size = _utf8_len(value)
    if size is None:
        error("command", "is not valid Unicode text")
        return None
    if size > policy.max_command_bytes:
        error("command", f"at most {policy.max_command_bytes} bytes (this one is {size})")
        return None
    return value


def _is_clean_absolute_path(path: Any) -> bool:
    return (
        isinstance(path, str)
        and 0 < len(path) <= MAX_PATH_CHARS
        and path.startswith("/")
        and _PATH_CHARS_RE.fullmatch(path) is not None
        and posixpath.normpath(path) == path
        and not path.startswith("//")
    )


def _parse_data_mount(value: Any, policy: SpecPolicy, error) -> str | None:
    if _absent(value):
        return ""
    if not isinstance(value, str):
        error("data_mount", "must be a string")
        return None
    if not _is_clean_absolute_path(value):
        error(
            "data_mount",
            "must be a normalised absolute path of letters, digits and ._- (no '..', '//', trailing '/' or spaces)",
        )
        return None
    for root in policy.data_roots:
        if value == root or value.startswith(root.rstrip("/") + "/"):
            return value
    error("data_mount", f"must be under one of: {', '.join(policy.data_roots) or 'none (data mounts are off)'}")
    return None


def _parse_environment(value: Any, policy: SpecPolicy, error) -> dict[str, str] | None:
    if _absent(value):
        return {}
    if isinstance(value, str):
        pairs = _parse_environment_lines(value, error)
        if pairs is None:
            return None
    elif isinstance(value, Mapping):
        pairs = list(value.items())
    else:
        error("environment", "must be an object of NAME: value strings, or NAME=VALUE lines")
        return None

    if len(pairs) > policy.max_env_vars:
        error("environment", f"at most {policy.max_env_vars} variables (got {len(pairs)})")
        return None
    environment: dict[str, str] = {}
    ok = True
    for name, env_value in pairs:
        if not isinstance(name, str) or not ENV_NAME_RE.fullmatch(name):
            shown = name if isinstance(name, str) and len(name) <= 64 and name.isprintable() else "a variable"
            error("environment", f"{shown!r} is not a variable name (letters, digits, _; not starting with a digit)")
            ok = False
            continue
        if is_reserved_env_name(name):
            error("environment", f"{name} is reserved (the portal, Slurm or the runtime sets it)")
            ok = False
            continue
        if name in environment:
            error("environment", f"{name} is given twice")
            ok = False
            continue
        if not isinstance(env_value, str):
            error("environment", f"the value of {name} must be a string")
            ok = False
            continue
        size = _utf8_len(env_value)
        if "\x00" in env_value or size is None:
            error("environment", f"the value of {name} must be text without NUL characters")
            ok = False
            continue
        if size > MAX_ENV_VALUE_BYTES:
            error("environment", f"the value of {name} is longer than {MAX_ENV_VALUE_BYTES} bytes")
            ok = False
            continue
        environment[name] = env_value
    return environment if ok else None


def _parse_environment_lines(text: str, error) -> list[tuple[str, str]] | None:
    """Form data: one NAME=VALUE per line; blank lines and lines starting with # are skipped."""
    pairs: list[tuple[str, str]] = []
    ok = True
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, env_value = line.partition("=")
        if not sep:
            error("environment", f"line {number}: expected NAME=VALUE")
            ok = False
            continue
        pairs.append((name.strip(" \t"), env_value))
    return pairs if ok else None
