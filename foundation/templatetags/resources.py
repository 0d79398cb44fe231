"""`{{ job.allocated_tres|resources }}` and `{{ job.tres_per_node|resources }}`: Slurm's resource
strings in words ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1" -> "1 A100 GPU,
1 CPU, 1,000 MB memory"); pages keep Slurm's own text in a `title` for those who know it.
A builtin of every template (gpupool/settings.py)."""

from __future__ import annotations

import re

from django import template
from django.conf import settings

register = template.Library()

_MEMORY_MB = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
# gres/gpu:a100=2 (allocated TRES) or gres/gpu:a100:2, gres:gpu:a100:2 (a request per node).
_GRES = re.compile(r"^gres[/:](?P<name>gpu|shard|nvme)(?::(?P<type>[a-z][a-z0-9_]*))?(?:[=:](?P<count>\d+))?$")


@register.filter(name="gpu_label")
def _label(gpu_type: str | None) -> str:
    """`{{ "a100"|gpu_label }}`: the type's label from the GPU types file ("NVIDIA A100 40GB")."""
    entry = settings.GPU_TYPES.get(gpu_type or "")
    return entry["label"] if entry else (gpu_type or "").upper()


def _plural(count: int, word: str) -> str:
    return f"{count:,} {word}{'' if count == 1 else 's'}"


def _memory(value: str) -> str:
    try:
        megabytes = float(value[:-1]) * _MEMORY_MB[value[-1]] if value[-1:] in _MEMORY_MB else float(value)
    except ValueError:
        return ""
    if megabytes >= 1024:
        return f"{megabytes / 1024:,.3g} GB memory"
    return f"{megabytes:,.0f} MB memory"


@register.filter
def resources(text) -> str:
    if not text:
        return ""
    gpus: dict[str | None, int] = {}
    shards: dict[str | None, int] = {}
    cpus = memory = nvme = ""
    for part in str(text).split(","):
        part = part.strip()
        gres = _GRES.match(part)
        if gres:
            count = int(gres["count"] or 1)
            kind = {"gpu": gpus, "shard": shards}.get(gres["name"])
            if kind is not None:
                # Allocated TRES lists gres/gpu=2 and gres/gpu:a100=2: the typed one says more.
                if gres["type"]:
                    kind.pop(None, None)
                    kind[gres["type"]] = count
                elif not any(key for key in kind):
                    kind[None] = count
            elif gres["name"] == "nvme":
                nvme = f"{count:,} GB NVMe"
            continue
        key, _eq, value = part.partition("=")
        if key == "cpu" and value.isdigit():
            cpus = _plural(int(value), "CPU")
        elif key == "mem" and value:
            memory = _memory(value)
    words = [_plural(count, f"{_label(kind)} GPU".strip()) for kind, count in gpus.items()]
    words += [_plural(count, f"{_label(kind)} GPU share".strip()) for kind, count in shards.items()]
    words += [word for word in (cpus, memory, nvme) if word]
    return ", ".join(words) or str(text)
