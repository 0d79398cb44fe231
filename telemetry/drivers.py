"""The NVIDIA driver each node runs, as its telemetry reports it: the NVML agent's
`driver_version`, dcgm-exporter's DCGM_FI_DRIVER_VERSION label, or on the dev cluster the
emulator's stated version (TELEMETRY_EMULATOR_DRIVER, marked "emulator"). Kept on
`cluster.Node` for the job form's image picker, which warns when an image's CUDA needs a newer
driver than the nodes of the chosen GPU type run (jobs/drivers.py)."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from django.db.models import Q

from cluster.models import Node

DRIVER_RE = re.compile(r"[0-9]{2,4}(?:\.[0-9]{1,4}){1,3}", re.ASCII)
# A report that changes nothing is written at most this often (when the node last said so).
REFRESH = timedelta(minutes=10)


def valid_driver(value) -> bool:
    return isinstance(value, str) and bool(DRIVER_RE.fullmatch(value))


def record_drivers(drivers: dict[str, str], *, source: str, now: datetime) -> int:
    """One conditional UPDATE per node: nothing is written while the version is unchanged and
    was reported within REFRESH (every batch of every node passes here)."""
    written = 0
    for node, version in drivers.items():
        if not valid_driver(version):
            continue
        stale = Q(driver_reported_at__isnull=True) | Q(driver_reported_at__lt=now - REFRESH)
        changed = ~Q(driver_version=version) | ~Q(driver_source=source)
        written += Node.objects.filter(Q(name=node) & (stale | changed)).update(
            driver_version=version, driver_source=source, driver_reported_at=now
        )
    return written
