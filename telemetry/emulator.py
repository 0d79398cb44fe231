"""GPU LOAD EMULATOR, for the dev cluster only (its GPUs are character devices with no
silicon behind them). It produces GpuSample values derived from real Slurm allocations,
as mirrored from the cluster: a GPU held by a running job is busy, an idle GPU is idle.
Samples go through the same storage as an NVML agent's, marked source="emulator", and the
heatmap labels them as emulated.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from datetime import datetime

from django.conf import settings

from cluster.gres import requested_shards
from cluster.models import Node
from jobs.models import Job
from telemetry.samples import GpuSample

# Memory and board power (idle, max watts) come from settings.GPU_TYPES (deploy/gpu_types.json);
# a type the file does not know (a node of an older layout) draws with these.
UNKNOWN_TYPE = {"memory_gb": 16, "power_w": {"idle": 30, "max": 300}}
# The least compute utilisation (%) of a GPU a running job holds; idle GPUs stay at 2 % or less.
BUSY_COMPUTE_FLOOR = 35


def _noise(*parts) -> float:
    """A repeatable value in [0, 1) per (node, GPU, time step): no two runs differ."""
    digest = hashlib.blake2b("|".join(map(str, parts)).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64


# Layers above may say which running jobs leave their GPUs idle (an interactive session whose
# kernels do nothing: interactive/apps.py); `provider(now)` returns those jobs' ids.
_idle_job_providers: list[Callable[[datetime], set[int]]] = []


def register_idle_jobs(provider: Callable[[datetime], set[int]]) -> None:
    if provider not in _idle_job_providers:
        _idle_job_providers.append(provider)


def emulated_samples(now: datetime) -> list[GpuSample]:
    idle_jobs: set[int] = set()
    for provider in _idle_job_providers:
        idle_jobs |= provider(now)
    held: dict[tuple[str, int], Job] = {}
    for job in Job.objects.on_cluster().filter(state="RUNNING").only("gpu_allocation", "tres_per_node", "slurm_job_id"):
        if job.pk in idle_jobs:
            continue  # drawn as idle GPUs
        for node, indexes in (job.gpu_allocation or {}).items():
            for index in indexes:
                held[(node, index)] = job
    step = int(now.timestamp() // settings.TELEMETRY_INTERVAL_SECONDS)
    samples = []
    for node in Node.objects.all():
        position = 0
        for group in node.gpus:
            info = settings.GPU_TYPES.get(group["type"], UNKNOWN_TYPE)
            total_mb = int(info["memory_gb"] * 1024)
            power = info.get("power_w") or UNKNOWN_TYPE["power_w"]
            idle_w, max_w = power["idle"], power["max"]
            for _ in range(group["count"]):
                index = position
                position += 1
                job = held.get((node.name, index))
                wobble = _noise(node.name, index, step)
                if job is None:
                    compute, memory, used = wobble * 2, wobble, 300 + int(wobble * 200)
                    temperature, power = 30 + wobble * 5, idle_w + wobble * 10
                else:
                    # Each job has its own character: some compute-bound, some data-bound.
                    character = _noise("job", job.slurm_job_id)
                    share = 1.0
                    shards = requested_shards(job.tres_per_node)
                    if shards:
                        share = min(1.0, shards / max(1, info.get("shards_per_gpu", 1)))
                    wave = 0.08 * math.sin(step / 3 + index)
                    # Busy means busy: at least BUSY_COMPUTE_FLOOR whatever the character, wave and
                    # noise (the floor 0.43 - 0.08 of the wave), so a held GPU never reads as idle.
                    compute = min(100.0, 100 * (0.43 + 0.5 * character + wave + 0.04 * wobble))
                    memory = min(100.0, max(0.0, 100 * (0.85 - 0.6 * character + wave + 0.05 * wobble)))
                    used = int(total_mb * min(0.99, share * (0.55 + 0.4 * character) + 0.02 * wobble))
                    temperature = 55 + compute * 0.25 + wobble * 3
                    power = idle_w + (max_w - idle_w) * compute / 100
                samples.append(
                    GpuSample(
                        time=now,
                        node=node.name,
                        index=index,
                        uuid=f"EMU-{node.name}-{index}",
                        compute_util=round(compute, 1),
                        memory_util=round(memory, 1),
                        memory_used_mb=min(used, total_mb),
                        memory_total_mb=total_mb,
                        temperature_c=round(temperature, 1),
                        power_w=round(power, 1),
                    )
                )
    return samples
