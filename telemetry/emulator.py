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

from cluster.actions import further_nodes
from cluster.models import Node
from cluster.records.gres import requested_shards
from jobs.models import Job
from telemetry.models import OWN_CLUSTER, cluster_key
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


def _held(cluster: str | None, now: datetime) -> dict[tuple[str, int], Job]:
    """(node, GPU index) -> the running job of `cluster` (None: the portal's own) holding it,
    less the jobs a layer above says leave their GPUs idle."""
    idle_jobs: set[int] = set()
    for provider in _idle_job_providers:
        idle_jobs |= provider(now)
    held: dict[tuple[str, int], Job] = {}
    running = Job.objects.on_cluster(cluster).filter(state="RUNNING")
    for job in running.only("gpu_allocation", "tres_per_node", "slurm_job_id"):
        if job.pk in idle_jobs:
            continue  # drawn as idle GPUs
        for node, indexes in (job.gpu_allocation or {}).items():
            for index in indexes:
                held[(node, index)] = job
    return held


def emulated_samples(now: datetime) -> list[GpuSample]:
    """The portal's own cluster's GPUs (the Node mirror); what the dev stack's emulated DCGM
    exporters serve too (telemetry/exporter_server.py)."""
    held = _held(None, now)
    samples = []
    for node in Node.objects.all():
        samples += _node_samples(node.name, node.gpus, held, now, cluster=OWN_CLUSTER)
    return samples


def emulated_further_samples(now: datetime) -> list[GpuSample]:
    """Each further cluster's GPUs, as its mirror pass last read them (the other dev generation
    in `make dev`), marked with the cluster: node names repeat across clusters."""
    samples = []
    for cluster in further_nodes.shown_clusters():
        nodes = further_nodes.nodes_of(cluster, now)
        if not nodes:
            continue
        held = _held(cluster, now)
        for node in nodes:
            samples += _node_samples(node.name, node.gpus, held, now, cluster=cluster_key(cluster))
    return samples


def _node_samples(name: str, gpus: list[dict], held, now: datetime, *, cluster: str) -> list[GpuSample]:
    step = int(now.timestamp() // settings.TELEMETRY_INTERVAL_SECONDS)
    # Further clusters' GPUs of the same node name and index differ by the cluster in their noise.
    seed = f"{cluster}:{name}" if cluster else name
    samples = []
    position = 0
    for group in gpus:
        info = settings.GPU_TYPES.get(group["type"], UNKNOWN_TYPE)
        total_mb = int(info["memory_gb"] * 1024)
        power = info.get("power_w") or UNKNOWN_TYPE["power_w"]
        idle_w, max_w = power["idle"], power["max"]
        for _ in range(group["count"]):
            index = position
            position += 1
            job = held.get((name, index))
            wobble = _noise(seed, index, step)
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
                    node=name,
                    index=index,
                    uuid=f"EMU-{seed}-{index}",
                    compute_util=round(compute, 1),
                    memory_util=round(memory, 1),
                    memory_used_mb=min(used, total_mb),
                    memory_total_mb=total_mb,
                    temperature_c=round(temperature, 1),
                    power_w=round(power, 1),
                    cluster=cluster,
                )
            )
    return samples
