"""GpuSamples written in DCGM-exporter's text format, the inverse of telemetry/dcgm.py's parser.

The dev cluster's emulator is served this way (`manage.py serve_emulated_dcgm`), so the dev
stack's Prometheus scrapes what a site's DCGM exporters would give it, labels included. The
fields written are the ones every default exporter has (GPU_UTIL, MEM_COPY_UTIL, FB_USED,
FB_FREE, GPU_TEMP, POWER_USAGE), not the profiling ones a datacenter GPU adds.
"""

from __future__ import annotations

from collections.abc import Iterable

from telemetry.dcgm import FB_FREE, FB_USED, GPU_TEMP, GPU_UTIL, MEM_COPY_UTIL, POWER_USAGE
from telemetry.samples import GpuSample

FIELDS = (
    (GPU_UTIL, "gauge", "GPU utilization (in %).", lambda s: f"{round(s.compute_util)}"),
    (MEM_COPY_UTIL, "gauge", "Memory utilization (in %).", lambda s: f"{round(s.memory_util)}"),
    (FB_USED, "gauge", "Framebuffer memory used (in MiB).", lambda s: f"{s.memory_used_mb}"),
    (FB_FREE, "gauge", "Framebuffer memory free (in MiB).", lambda s: f"{s.memory_total_mb - s.memory_used_mb}"),
    (GPU_TEMP, "gauge", "GPU temperature (in C).", lambda s: f"{round(s.temperature_c)}"),
    (POWER_USAGE, "gauge", "Power draw (in W).", lambda s: f"{s.power_w:.3f}"),
)


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def render_dcgm_metrics(samples: Iterable[GpuSample], *, models: dict[str, str], driver: str = "") -> str:
    """`models`: node -> the GPU's product name (dcgm-exporter's modelName label)."""
    samples = sorted(samples, key=lambda sample: (sample.node, sample.index))
    # Each GPU's labels once, for all of its fields.
    labelled = [
        (
            sample,
            f'gpu="{sample.index}",UUID="{_label(sample.uuid)}",device="nvidia{sample.index}",'
            f'modelName="{_label(models.get(sample.node, ""))}",Hostname="{_label(sample.node)}",'
            f'DCGM_FI_DRIVER_VERSION="{_label(driver)}"',
        )
        for sample in samples
    ]
    lines = []
    for name, kind, help_text, value in FIELDS:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        lines += [f"{name}{{{labels}}} {value(sample)}" for sample, labels in labelled]
    return "\n".join(lines) + "\n"
