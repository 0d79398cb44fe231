"""Parsing an agent's batch. Strict: a malformed sample refuses the whole batch with a
message naming it, so a broken agent is noticed instead of drawing nonsense."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

from telemetry.samples import GpuSample

MAX_SAMPLES_PER_BATCH = 20_000
# Agents buffer during outages; older samples than this are of no use to anyone.
MAX_SAMPLE_AGE = timedelta(hours=2)
MAX_CLOCK_SKEW = timedelta(minutes=5)


class BatchError(ValueError):
    pass


class WrongNode(BatchError):
    """The token is another node's."""


def _number(sample: dict, key: str, low: float, high: float, where: str) -> float:
    value = sample.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BatchError(f"{where}: {key} must be a number")
    if not low <= value <= high:
        raise BatchError(f"{where}: {key}={value} is outside {low}..{high}")
    return value


def _time(value, where: str, now: datetime) -> datetime:
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            moment = datetime.fromtimestamp(value, tz=UTC)
        else:
            moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except (ValueError, OverflowError, OSError):
        raise BatchError(f"{where}: time {value!r} is not an ISO 8601 time or epoch seconds") from None
    if moment.tzinfo is None:
        raise BatchError(f"{where}: time must carry a time zone (UTC)")
    if moment > now + MAX_CLOCK_SKEW:
        raise BatchError(f"{where}: time {moment.isoformat()} is in the future (check the node's clock)")
    return moment


def parse_batch(payload, *, node: str, now: datetime, cluster: str = "") -> tuple[list[GpuSample], int]:
    """Returns the samples to store (of `node` on `cluster`, as the token says: "" the portal's
    own) and how many were too old to keep."""
    if not isinstance(payload, dict):
        raise BatchError("the body must be a JSON object")
    if payload.get("node") != node:
        raise WrongNode(f"this token belongs to node {node!r}, not {payload.get('node')!r}")
    raw_samples = payload.get("samples")
    if not isinstance(raw_samples, list):
        raise BatchError("samples must be a list")
    if len(raw_samples) > MAX_SAMPLES_PER_BATCH:
        raise BatchError(f"at most {MAX_SAMPLES_PER_BATCH} samples per batch")
    samples, too_old = [], 0
    for position, sample in enumerate(raw_samples):
        where = f"samples[{position}]"
        if not isinstance(sample, dict):
            raise BatchError(f"{where} must be an object")
        index = sample.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
            raise BatchError(f"{where}: index must be an integer 0..1023")
        uuid = sample.get("uuid", "")
        if not isinstance(uuid, str) or len(uuid) > 100:
            raise BatchError(f"{where}: uuid must be a string of at most 100 characters")
        moment = _time(sample.get("time"), where, now)
        if now - moment > MAX_SAMPLE_AGE:
            too_old += 1
            continue
        total = int(_number(sample, "memory_total_mb", 1, 10_000_000, where))
        samples.append(
            GpuSample(
                time=moment,
                node=node,
                index=index,
                uuid=uuid,
                compute_util=_number(sample, "compute_util", 0, 100, where),
                memory_util=_number(sample, "memory_util", 0, 100, where),
                memory_used_mb=int(_number(sample, "memory_used_mb", 0, total, where)),
                memory_total_mb=total,
                temperature_c=_number(sample, "temperature_c", -50, 200, where),
                power_w=_number(sample, "power_w", 0, 10_000, where),
                cluster=cluster,
            )
        )
    return samples, too_old
