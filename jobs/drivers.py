"""Does an image's CUDA run on the NVIDIA driver of the nodes a job could land on? The product's
"driver/container mismatch": an image built for a newer CUDA than the host driver supports
fails at its first CUDA call. The drivers are what each node's telemetry last reported
(telemetry/drivers.py, on `cluster.Node`); the image's need is its catalogue `min_driver`.
A job of a GPU type may run on any node of that type, so the oldest driver among them counts.
Nothing is refused here: the form and the API say it, the user decides."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from cluster.models import Node
from foundation.images import Image, version_tuple

# An older report may describe a driver that was upgraded since.
FRESH_FOR = timedelta(days=1)


def drivers_by_gpu_type() -> dict[str, dict]:
    """{gpu_type: {"oldest": "550.54.15", "reporting": 2, "nodes": 2, "source": "nvml"}}; a type
    whose nodes have not reported has "oldest": ""."""
    since = timezone.now() - FRESH_FOR
    result: dict[str, dict] = {}
    for node in Node.objects.only("gpus", "driver_version", "driver_source", "driver_reported_at"):
        for gpu_type in {group.get("type", "") for group in node.gpus or [] if group.get("type")}:
            entry = result.setdefault(gpu_type, {"oldest": "", "reporting": 0, "nodes": 0, "sources": set()})
            entry["nodes"] += 1
            if not node.driver_version or not node.driver_reported_at or node.driver_reported_at < since:
                continue
            entry["reporting"] += 1
            entry["sources"].add(node.driver_source)
            if not entry["oldest"] or version_tuple(node.driver_version) < version_tuple(entry["oldest"]):
                entry["oldest"] = node.driver_version
    for entry in result.values():
        entry["source"] = ", ".join(sorted(entry.pop("sources")))
    return result


def driver_warning(image: Image, gpu_type: str, drivers: dict[str, dict]) -> str:
    oldest = drivers.get(gpu_type, {}).get("oldest", "")
    if not image.driver_too_old(oldest):
        return ""
    return (
        f"{image.reference} needs NVIDIA driver {image.min_driver} or newer (its CUDA is {image.cuda}), but "
        f"{gpu_type} nodes run {oldest}: the job may fail at its first CUDA call. Choose an image built for an "
        "older CUDA, or another GPU type."
    )
