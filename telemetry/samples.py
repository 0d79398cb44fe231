"""One GPU sample: the single shape every telemetry source produces.

Sources: the NVML agent on each node (production), DCGM-exporter metrics (production,
optional), and the dev cluster's emulator (clearly named as such) that derives load from
real Slurm allocations. Storage and the heatmap only ever see GpuSample.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class GpuSample:
    time: datetime  # timezone-aware, UTC
    node: str
    index: int  # the GPU's index on its node (as in CUDA_VISIBLE_DEVICES / nvidia-smi)
    uuid: str  # "GPU-..." from NVML; the emulator makes stable fake ones prefixed "EMU-"
    compute_util: float  # SM activity, percent 0-100 ("how hard the model computes")
    memory_util: float  # memory bandwidth busy, percent 0-100 ("how hard data moves")
    memory_used_mb: int
    memory_total_mb: int
    temperature_c: float
    power_w: float
    # Which cluster's node: "" the portal's own, else a further cluster's name (telemetry.models).
    cluster: str = ""

    @property
    def memory_used_fraction(self) -> float:
        return self.memory_used_mb / self.memory_total_mb if self.memory_total_mb else 0.0

    def to_json(self) -> dict:
        return {
            "time": self.time.isoformat(),
            "node": self.node,
            "index": self.index,
            "uuid": self.uuid,
            "compute_util": self.compute_util,
            "memory_util": self.memory_util,
            "memory_used_mb": self.memory_used_mb,
            "memory_total_mb": self.memory_total_mb,
            "temperature_c": self.temperature_c,
            "power_w": self.power_w,
        }
