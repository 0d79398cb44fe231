"""GpuSamples written in DCGM-exporter's text format by prometheus_client, the inverse of
telemetry/dcgm.py's parser.

The dev cluster's emulator is served this way (`manage.py serve_emulated_dcgm`), so the dev
stack's Prometheus scrapes what a site's DCGM exporters would give it, labels included. The
fields written are the ones every default exporter has (GPU_UTIL, MEM_COPY_UTIL, FB_USED,
FB_FREE, GPU_TEMP, POWER_USAGE), not the profiling ones a datacenter GPU adds.
"""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.core import CollectorRegistry, GaugeMetricFamily
from prometheus_client.exposition import generate_latest

from telemetry.dcgm import FB_FREE, FB_USED, GPU_TEMP, GPU_UTIL, MEM_COPY_UTIL, POWER_USAGE
from telemetry.samples import GpuSample

FIELDS = (
    (GPU_UTIL, "GPU utilization (in %).", lambda s: round(s.compute_util)),
    (MEM_COPY_UTIL, "Memory utilization (in %).", lambda s: round(s.memory_util)),
    (FB_USED, "Framebuffer memory used (in MiB).", lambda s: s.memory_used_mb),
    (FB_FREE, "Framebuffer memory free (in MiB).", lambda s: s.memory_total_mb - s.memory_used_mb),
    (GPU_TEMP, "GPU temperature (in C).", lambda s: round(s.temperature_c)),
    (POWER_USAGE, "Power draw (in W).", lambda s: round(s.power_w, 3)),
)
LABELS = ("gpu", "UUID", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")


class _Samples:
    """A collector of fixed samples, for prometheus_client to write in its text format."""

    def __init__(self, samples: list[GpuSample], models: dict[str, str], driver: str):
        self.samples, self.models, self.driver = samples, models, driver

    def collect(self):
        for name, help_text, value in FIELDS:
            family = GaugeMetricFamily(name, help_text, labels=LABELS)
            for sample in self.samples:
                labels = (
                    str(sample.index),
                    sample.uuid,
                    f"nvidia{sample.index}",
                    self.models.get(sample.node, ""),
                    sample.node,
                    self.driver,
                )
                family.add_metric(labels, value(sample))
            yield family


def render_dcgm_metrics(samples: Iterable[GpuSample], *, models: dict[str, str], driver: str = "") -> str:
    """`models`: node -> the GPU's product name (dcgm-exporter's modelName label)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Samples(sorted(samples, key=lambda sample: (sample.node, sample.index)), models, driver))
    return generate_latest(registry).decode()
