"""Parsing of Slurm's GRES and TRES strings, which are the same in every API version.

Examples, as slurmctld prints them:
    node gres        "gpu:a100:4(S:0),shard:a100:40(S:0)"
    node gres_used   "gpu:a100:2(IDX:0-1),shard:a100:0(0/10,0/10,0/10,0/10)"
    tres string      "cpu=2,mem=2000M,node=1,billing=2,gres/gpu=1,gres/gpu:a100=1"
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cluster.records.types import GpuGroup

# name[:type]:count[(extra)] ; type may contain letters, digits, '-', '_', '.'
_GRES_ITEM = re.compile(r"^(?P<name>[A-Za-z0-9_]+)(?::(?P<type>[^:(]+))?:(?P<count>\d+)(?:\((?P<extra>[^)]*)\))?$")


@dataclass(frozen=True)
class GresItem:
    name: str
    gres_type: str
    count: int
    extra: str


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    items, depth, current = [], 0, []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if current:
        items.append("".join(current))
    return [item.strip() for item in items if item.strip()]


def parse_gres(text: str | None) -> list[GresItem]:
    items = []
    for raw in _split_top_level(text or ""):
        match = _GRES_ITEM.match(raw)
        if not match:
            continue
        items.append(
            GresItem(
                name=match["name"],
                gres_type=match["type"] or "",
                count=int(match["count"]),
                extra=match["extra"] or "",
            )
        )
    return items


def parse_index_list(text: str) -> tuple[int, ...]:
    """'0-1,3' -> (0, 1, 3); 'N/A' or '' -> ()."""
    indexes: list[int] = []
    for part in text.split(","):
        part = part.strip()
        if not part or not part[0].isdigit():
            continue
        if "-" in part:
            low, high = part.split("-", 1)
            indexes.extend(range(int(low), int(high) + 1))
        else:
            indexes.append(int(part))
    return tuple(indexes)


def _used_indexes(extra: str) -> tuple[int, ...]:
    if extra.startswith("IDX:"):
        return parse_index_list(extra[len("IDX:") :])
    return ()


def gpu_groups(gres: str | None, gres_used: str | None) -> tuple[GpuGroup, ...]:
    used: dict[str, tuple[int, ...]] = {}
    for item in parse_gres(gres_used):
        if item.name == "gpu":
            used[item.gres_type] = used.get(item.gres_type, ()) + _used_indexes(item.extra)
    return tuple(
        GpuGroup(gpu_type=item.gres_type, count=item.count, used_indexes=tuple(sorted(used.get(item.gres_type, ()))))
        for item in parse_gres(gres)
        if item.name == "gpu"
    )


def shard_totals(gres: str | None, gres_used: str | None) -> tuple[int, int]:
    total = sum(item.count for item in parse_gres(gres) if item.name == "shard")
    used = sum(item.count for item in parse_gres(gres_used) if item.name == "shard")
    return total, used


def requested_gpus(tres_per_node: str | None) -> tuple[str, int]:
    """The GPU type and whole GPUs a job asks for per node: ("a100", 2) for
    "gres/gpu:a100:2". A shard request counts as one GPU of its type (the portal's quota
    convention); ("", 0) when no typed GPU is asked for."""
    items = parse_gres(",".join(part.strip().removeprefix("gres/") for part in (tres_per_node or "").split(",")))
    for item in items:
        if item.name == "gpu" and item.gres_type:
            return item.gres_type, item.count
    for item in items:
        if item.name == "shard" and item.gres_type and item.count:
            return item.gres_type, 1
    return "", 0


def gpus_allocated(allocated_tres: str | None, gpu_allocation: dict | None) -> int | None:
    """The GPUs an allocation holds: Slurm's allocated `gres/gpu`; for a job on shards, the GPUs
    its shards sit on (one at least). None while Slurm has allocated the job no GPU."""
    allocated = parse_tres(allocated_tres)
    if allocated.get("gres/gpu"):
        return allocated["gres/gpu"]
    if allocated.get("gres/shard"):
        held = {(node, index) for node, indexes in (gpu_allocation or {}).items() for index in indexes}
        return max(1, len(held))
    return None


def gpus_held(allocated_tres: str | None, gpu_allocation: dict | None, tres_per_node: str | None) -> int:
    """The GPUs a job holds (`gpus_allocated`), or asks for (`requested_gpus`) while Slurm has
    allocated it none: what `Job.gpu_count` stores (jobs/models.py)."""
    allocated = gpus_allocated(allocated_tres, gpu_allocation)
    return allocated if allocated is not None else requested_gpus(tres_per_node)[1]


def requested_quota(tres_per_node: str | None) -> tuple[str, int, int]:
    """(GPU type, whole GPUs, shards) a job asks for per node: ("a100", 2, 0) for
    "gres/gpu:a100:2", ("a100", 0, 3) for "gres/shard:a100:3", ("", 0, 0) without a typed GPU.
    What the portal counts against a plan's concurrent GPUs (jobs.submission.quota)."""
    items = parse_gres(",".join(part.strip().removeprefix("gres/") for part in (tres_per_node or "").split(",")))
    for item in items:
        if item.name == "gpu" and item.gres_type:
            return item.gres_type, item.count, 0
    for item in items:
        if item.name == "shard" and item.gres_type and item.count:
            return item.gres_type, 0, item.count
    return "", 0, 0


def parse_tres(text: str | None) -> dict[str, int]:
    """'cpu=2,mem=2000M,gres/gpu=1' -> {'cpu': 2, 'mem': 2000, 'gres/gpu': 1} (memory in MB)."""
    result: dict[str, int] = {}
    for part in (text or "").split(","):
        if "=" not in part:
            continue
        key, value = part.split("=", 1)
        result[key.strip()] = _tres_number(value.strip())
    return result


_MEMORY_UNITS = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def _tres_number(value: str) -> int:
    if value and value[-1] in _MEMORY_UNITS:
        return int(float(value[:-1]) * _MEMORY_UNITS[value[-1]])
    try:
        return int(value)
    except ValueError:
        return 0


def job_gpu_indexes(gres_detail_entry: str) -> tuple[int, ...]:
    """GPU indexes a job holds on one node, from its gres_detail entry:
    "gpu:a100:2(IDX:1-2)" -> (1, 2); "shard:a100:3(3/10,0/10,0/10,0/10)" -> (0,)."""
    indexes: set[int] = set()
    for item in parse_gres(gres_detail_entry):
        if item.name == "gpu":
            indexes.update(_used_indexes(item.extra))
        elif item.name == "shard" and "/" in item.extra:
            for position, share in enumerate(item.extra.split(",")):
                used = share.split("/", 1)[0]
                if used.isdigit() and int(used) > 0:
                    indexes.add(position)
    return tuple(sorted(indexes))


# A GRES type name as it may appear in a request ("a100", "rtx4090").
_GRES_TYPE_NAME = re.compile(r"[a-z0-9_]{1,32}")


def build_tres_per_node(gpu_type: str, *, gpus: int = 0, shards: int = 0, nvme_gb: int = 0) -> str:
    """Slurm's `tres_per_node` for a portal job, the one place it is written (every REST
    adapter version sends `JobSubmission.tres_per_node` as it is): whole GPUs or shards of one
    GPU type, then the NVMe cache in GB when asked for (a count-only GRES):
    "gres/gpu:a100:2", "gres/shard:a100:3,gres/nvme:500". The GPU part comes first, so
    readers that look at the first item see the GPU request."""
    if not _GRES_TYPE_NAME.fullmatch(gpu_type or ""):
        raise ValueError(f"not a GPU type name: {gpu_type!r}")
    for name, value in (("gpus", gpus), ("shards", shards), ("nvme_gb", nvme_gb)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be a whole number, 0 or more")
    if gpus > 0 and shards > 0:
        raise ValueError("a request is whole GPUs or shards, not both")
    if gpus > 0:
        items = [f"gres/gpu:{gpu_type}:{gpus}"]
    elif shards > 0:
        items = [f"gres/shard:{gpu_type}:{shards}"]
    else:
        raise ValueError("a GPU request needs a GPU count or shards")
    if nvme_gb > 0:
        # A plain count: Slurm reads "500G" as 500 x 1024^3.
        items.append(f"gres/nvme:{nvme_gb}")
    return ",".join(items)


def requested_items(tres_per_node: str | None) -> dict[str, int]:
    """What a `tres_per_node` asks for per node, by GRES name and type:
    "gres/shard:a100:3,gres/nvme:500" -> {"shard:a100": 3, "nvme": 500}."""
    items = parse_gres(",".join(part.strip().removeprefix("gres/") for part in (tres_per_node or "").split(",")))
    return {f"{item.name}:{item.gres_type}" if item.gres_type else item.name: item.count for item in items}


def requested_shards(tres_per_node: str | None) -> int:
    """The shards a `tres_per_node` asks for per node (0 for whole GPUs)."""
    return sum(count for key, count in requested_items(tres_per_node).items() if key.split(":")[0] == "shard")


def requested_nvme_gb(tres_per_node: str | None) -> int:
    """The NVMe cache in GB a `tres_per_node` asks for per node (0 when none)."""
    return requested_items(tres_per_node).get("nvme", 0)
