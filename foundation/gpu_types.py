"""The pool's GPU types, defined once in a JSON file (deploy/gpu_types.json by default).

The file holds, per GPU type, its label, memory, shards per GPU (GPU memory is requested as
shards of one GPU), the most GPUs of the type on one node, and its board power (idle, max
watts; the telemetry emulator draws with it); and, for the dev cluster only, its nodes.
`settings.GPU_TYPES` is the validated `gpu_types` section (settings load it at start-up, so
a bad file stops the process); deploy/devcluster/gpu_layout.py generates the dev cluster's
slurm.conf nodes, gres.conf and typed TRES from the same file.

Pure and standard library only: the dev-cluster scripts load this file with the host's
bare python3, where Django is not installed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

try:
    from django.core.exceptions import ImproperlyConfigured as _ConfigError
except ImportError:  # the host's python3 running deploy/devcluster/gpu_layout.py
    _ConfigError = ValueError  # type: ignore[assignment,misc]

DEFAULT_GPU_TYPES_FILE = Path(__file__).resolve().parent.parent / "deploy" / "gpu_types.json"

# A type name goes into Slurm's GRES names (gres/gpu:<type>, --gres=gpu:<type>:N, a
# feature gpu_type:<type>). It starts with a letter: "gpu:4090" would read as a count.
TYPE_NAME_RE = re.compile(r"[a-z][a-z0-9_]{0,31}", re.ASCII)
NODE_NAME_RE = re.compile(r"[a-z][a-z0-9-]{0,62}", re.ASCII)
LABEL_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9 .,()/+-]{0,63}", re.ASCII)

_TOP_KEYS = {"comment", "gpu_types", "dev_nodes"}
_TYPE_KEYS = {"label", "memory_gb", "shards_per_gpu", "per_node", "power_w"}
_REQUIRED_TYPE_KEYS = ("label", "memory_gb", "shards_per_gpu", "per_node")
_NODE_KEYS = {"name", "gpu_type", "gpus", "nvme_gb"}


class GpuTypesError(_ConfigError):
    """A GPU types file or setting that cannot be used; the message names the place and the key."""


@dataclass(frozen=True)
class GpuType:
    # Field order kept from jobs.submission.spec's former GpuTypeInfo(name, memory_gb, per_node, shards_per_gpu).
    name: str
    memory_gb: int
    per_node: int
    shards_per_gpu: int
    label: str = ""
    idle_w: int | None = None
    max_w: int | None = None

    @property
    def shard_gb(self) -> int:
        """GPU memory per shard (GB), the portal's convention (4 GB on the dev cluster)."""
        return self.memory_gb // self.shards_per_gpu

    def shards_for(self, memory_gb: int) -> int:
        """Shards of one GPU that hold `memory_gb`: ceil(memory_gb / (memory_gb_of_type / shards_per_gpu)).

        Exact integer arithmetic, so asking for the whole GPU's memory never needs more
        than `shards_per_gpu` shards even where memory_gb does not divide evenly.
        """
        return -(-memory_gb * self.shards_per_gpu // self.memory_gb)

    def as_setting(self) -> dict[str, Any]:
        """The type as the file (and settings.GPU_TYPES) writes it."""
        entry: dict[str, Any] = {
            "label": self.label,
            "memory_gb": self.memory_gb,
            "shards_per_gpu": self.shards_per_gpu,
            "per_node": self.per_node,
        }
        if self.idle_w is not None and self.max_w is not None:
            entry["power_w"] = {"idle": self.idle_w, "max": self.max_w}
        return entry


@dataclass(frozen=True)
class DevNode:
    """One emulated node of the dev cluster: all its GPUs are of one type."""

    name: str
    gpu_type: str
    gpus: int
    # NVMe cache the node offers, in GB: a count-only GRES `nvme` (0: none), so Slurm
    # schedules it and slurmdbd records it (`gres/nvme`) for billing.
    nvme_gb: int = 0


@dataclass(frozen=True)
class GpuCatalog:
    types: Mapping[str, GpuType]
    dev_nodes: tuple[DevNode, ...] = ()

    def settings_dict(self) -> dict[str, dict[str, Any]]:
        """settings.GPU_TYPES: {type: {label, memory_gb, shards_per_gpu, per_node[, power_w]}}, file order."""
        return {name: gpu_type.as_setting() for name, gpu_type in self.types.items()}


def load_gpu_types(path: Path | str) -> GpuCatalog:
    """Read and check a GPU types file; GpuTypesError (ImproperlyConfigured) names what is wrong."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        _fail(str(path), f"cannot be read ({exc.strerror or exc})")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        _fail(str(path), f"not JSON ({exc.msg} at line {exc.lineno})")
    return parse_gpu_types(doc, source=str(path))


def parse_gpu_types(doc: Any, *, source: str) -> GpuCatalog:
    """The whole file's content (already decoded JSON) -> a GpuCatalog, or GpuTypesError."""
    if not isinstance(doc, dict):
        _fail(source, "the file must hold a JSON object with gpu_types (and dev_nodes)")
    _no_unknown_keys(source, "", doc, _TOP_KEYS)
    if "comment" in doc and not isinstance(doc["comment"], str):
        _fail(source, "comment must be a string")
    if "gpu_types" not in doc:
        _fail(source, "gpu_types is missing")
    types = gpu_types_from_mapping(doc["gpu_types"], source=source)
    return GpuCatalog(types=types, dev_nodes=_dev_nodes(doc.get("dev_nodes", []), types, source))


def gpu_types_from_mapping(raw: Any, *, source: str = "settings.GPU_TYPES") -> Mapping[str, GpuType]:
    """The `gpu_types` section (as in the file, or settings.GPU_TYPES) -> {name: GpuType}, in order."""
    if not isinstance(raw, Mapping) or not raw:
        _fail(source, "gpu_types must be a non-empty object of GPU types")
    types: dict[str, GpuType] = {}
    for name, entry in raw.items():
        if not isinstance(name, str) or not TYPE_NAME_RE.fullmatch(name):
            _fail(source, f"gpu_types: {name!r} is not a GPU type name (a lowercase letter, then a-z 0-9 _; <= 32)")
        where = f"gpu_types.{name}"
        if not isinstance(entry, Mapping):
            _fail(source, f"{where} must be an object with {', '.join(_REQUIRED_TYPE_KEYS)}")
        _no_unknown_keys(source, where + ".", entry, _TYPE_KEYS)
        missing = [key for key in _REQUIRED_TYPE_KEYS if key not in entry]
        if missing:
            _fail(source, f"{where} needs {', '.join(missing)}")
        label = entry["label"]
        if not isinstance(label, str) or not LABEL_RE.fullmatch(label):
            _fail(source, f"{where}.label must be a plain name of 1-64 characters (letters, digits, space .,()/+-)")
        memory_gb, shards, per_node = (
            _positive_int(source, f"{where}.{key}", entry[key]) for key in ("memory_gb", "shards_per_gpu", "per_node")
        )
        if shards > memory_gb:
            # Memory is asked for in whole GB and mapped to shards: a shard under 1 GB cannot be asked for.
            _fail(source, f"{where}: shards_per_gpu ({shards}) is more than memory_gb ({memory_gb}); a shard is 1 GB+")
        idle_w = max_w = None
        if "power_w" in entry:
            idle_w, max_w = _power(source, f"{where}.power_w", entry["power_w"])
        types[name] = GpuType(
            name=name,
            memory_gb=memory_gb,
            per_node=per_node,
            shards_per_gpu=shards,
            label=label,
            idle_w=idle_w,
            max_w=max_w,
        )
    return MappingProxyType(types)


def _dev_nodes(raw: Any, types: Mapping[str, GpuType], source: str) -> tuple[DevNode, ...]:
    if not isinstance(raw, list):
        _fail(source, "dev_nodes must be a list of {name, gpu_type, gpus}")
    nodes: list[DevNode] = []
    seen: set[str] = set()
    for position, entry in enumerate(raw):
        where = f"dev_nodes[{position}]"
        if not isinstance(entry, dict):
            _fail(source, f"{where} must be an object with name, gpu_type and gpus")
        _no_unknown_keys(source, where + ".", entry, _NODE_KEYS)
        missing = [key for key in ("name", "gpu_type", "gpus") if key not in entry]
        if missing:
            _fail(source, f"{where} needs {', '.join(missing)}")
        name, gpu_type = entry["name"], entry["gpu_type"]
        if not isinstance(name, str) or not NODE_NAME_RE.fullmatch(name):
            _fail(source, f"{where}.name {name!r} is not a node name (a lowercase letter, then a-z 0-9 -; 63 at most)")
        if name in seen:
            _fail(source, f"{where}.name {name!r} appears twice")
        seen.add(name)
        if gpu_type not in types:
            _fail(source, f"{where}.gpu_type {gpu_type!r} is not in gpu_types ({', '.join(types)})")
        gpus = _positive_int(source, f"{where}.gpus", entry["gpus"])
        if gpus > types[gpu_type].per_node:
            # per_node is what the portal lets one job ask for: a node with more would never be filled.
            most = types[gpu_type].per_node
            _fail(source, f"{where}.gpus ({gpus}) is more than gpu_types.{gpu_type}.per_node ({most})")
        nvme_gb = _positive_int(source, f"{where}.nvme_gb", entry["nvme_gb"]) if "nvme_gb" in entry else 0
        nodes.append(DevNode(name=name, gpu_type=gpu_type, gpus=gpus, nvme_gb=nvme_gb))
    return tuple(nodes)


def _power(source: str, where: str, raw: Any) -> tuple[int, int]:
    if not isinstance(raw, Mapping) or set(raw) != {"idle", "max"}:
        _fail(source, f'{where} must be {{"idle": watts, "max": watts}}')
    idle, top = raw["idle"], raw["max"]
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (idle, top)) or not 0 <= idle < top:
        _fail(source, f"{where}: idle and max must be whole watts with 0 <= idle < max")
    return idle, top


def _positive_int(source: str, where: str, value: Any) -> int:
    # bool is an int in Python; true is not a count.
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        _fail(source, f"{where} must be a positive whole number, not {value!r}")
    return value


def _no_unknown_keys(source: str, prefix: str, entry: Mapping, known: set[str]) -> None:
    unknown = sorted(str(key) for key in entry if key not in known)
    if unknown:
        _fail(source, f"unknown key {prefix}{unknown[0]} (known: {', '.join(sorted(known))})")


def _fail(source: str, message: str) -> NoReturn:
    raise GpuTypesError(f"GPU types ({source}): {message}") from None
