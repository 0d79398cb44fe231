"""Read DCGM-exporter metrics (Prometheus text exposition format) into GpuSample objects.

DCGM-exporter (NVIDIA's Prometheus exporter, port 9400, ``/metrics``) is the optional production source on
nodes that run it; nodes without it run the NVML agent (``telemetry/agent``). The format is parsed here, with
no prometheus_client dependency.

Field mapping, per GPU (series grouped by node and the ``gpu`` label):

* compute_util: ``DCGM_FI_PROF_SM_ACTIVE`` (ratio 0-1, x100) when present, else ``DCGM_FI_DEV_GPU_UTIL`` (%).
  SM_ACTIVE is the fraction of time the streaming multiprocessors had work, averaged over all SMs: "how hard
  the model computes", which the heatmap's tooltip promises. GPU_UTIL only says a kernel was running, so one
  small kernel on one SM already reads 100 %.
* memory_util: ``DCGM_FI_PROF_DRAM_ACTIVE`` (ratio 0-1, x100) when present, else ``DCGM_FI_DEV_MEM_COPY_UTIL``
  (%). DRAM_ACTIVE is the fraction of cycles the memory interface moved data, i.e. memory bandwidth: "how hard
  data moves".
* memory_used_mb: ``DCGM_FI_DEV_FB_USED``; memory_total_mb: ``DCGM_FI_DEV_FB_TOTAL`` when present, else
  FB_USED + ``DCGM_FI_DEV_FB_FREE`` (+ ``DCGM_FI_DEV_FB_RESERVED`` when present; newer DCGM counts the
  driver's reservation apart from "used"). All in MiB, like nvidia-smi and the NVML agent.
* temperature_c: ``DCGM_FI_DEV_GPU_TEMP`` (C); power_w: ``DCGM_FI_DEV_POWER_USAGE`` (W).
* node: the ``Hostname`` label, or ``node_override``; index: ``gpu``; uuid: ``UUID``.

The PROF (profiling) fields need a datacenter GPU and a collectors file that enables them, so older or default
exporters lack them. A value that is NaN, infinite or one of DCGM's "blank" sentinels (>= 0x7ffffff0, e.g.
9223372036854775794 for "not supported") counts as missing; a missing preferred field falls back to the other
one. A GPU still missing a required value is skipped and named in the problems list. Series of MIG instances
(a non-empty ``GPU_I_ID`` label) are ignored: the heatmap shows whole GPUs. Sample timestamps in the text are
accepted but not used: every sample gets the scrape time ``now``.
"""

from __future__ import annotations

import logging
import math
import re
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from datetime import datetime

from telemetry.samples import GpuSample

log = logging.getLogger(__name__)

SM_ACTIVE = "DCGM_FI_PROF_SM_ACTIVE"
DRAM_ACTIVE = "DCGM_FI_PROF_DRAM_ACTIVE"
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
MEM_COPY_UTIL = "DCGM_FI_DEV_MEM_COPY_UTIL"
FB_USED = "DCGM_FI_DEV_FB_USED"
FB_FREE = "DCGM_FI_DEV_FB_FREE"
FB_RESERVED = "DCGM_FI_DEV_FB_RESERVED"
FB_TOTAL = "DCGM_FI_DEV_FB_TOTAL"
GPU_TEMP = "DCGM_FI_DEV_GPU_TEMP"
POWER_USAGE = "DCGM_FI_DEV_POWER_USAGE"

WANTED = frozenset(
    {SM_ACTIVE, DRAM_ACTIVE, GPU_UTIL, MEM_COPY_UTIL, FB_USED, FB_FREE, FB_RESERVED, FB_TOTAL, GPU_TEMP, POWER_USAGE}
)
DCGM_BLANK = 0x7FFFFFF0  # DCGM_INT32_BLANK; the int64 and fp64 blanks are larger still

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n"}


class ParseError(ValueError):
    pass


def _skip_spaces(line: str, pos: int) -> int:
    while pos < len(line) and line[pos] in " \t":
        pos += 1
    return pos


def _parse_labels(line: str, pos: int) -> tuple[dict[str, str], int]:
    """Parse ``name="value",...}`` starting just after ``{``; returns the labels and the position after ``}``."""
    labels: dict[str, str] = {}
    while True:
        pos = _skip_spaces(line, pos)
        if pos < len(line) and line[pos] == "}":
            return labels, pos + 1
        match = _LABEL_NAME.match(line, pos)
        if not match:
            raise ParseError(f"bad label name at column {pos + 1}")
        name = match.group()
        pos = _skip_spaces(line, match.end())
        if line[pos : pos + 1] != "=":
            raise ParseError(f"expected '=' after label {name}")
        pos = _skip_spaces(line, pos + 1)
        if line[pos : pos + 1] != '"':
            raise ParseError(f"expected '\"' to open the value of label {name}")
        pos += 1
        chars: list[str] = []
        while True:
            if pos >= len(line):
                raise ParseError(f"unterminated value of label {name}")
            ch = line[pos]
            if ch == "\\" and pos + 1 < len(line):
                nxt = line[pos + 1]
                chars.append(_ESCAPES.get(nxt, "\\" + nxt))
                pos += 2
            elif ch == '"':
                pos += 1
                break
            else:
                chars.append(ch)
                pos += 1
        labels[name] = "".join(chars)
        pos = _skip_spaces(line, pos)
        if line[pos : pos + 1] == ",":
            pos += 1
        elif line[pos : pos + 1] != "}":
            raise ParseError(f"expected ',' or '}}' after label {name}")


def parse_line(line: str) -> tuple[str, dict[str, str], float] | None:
    """One exposition line -> (metric name, labels, value); None for blank and comment lines."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    match = _NAME.match(line)
    if not match:
        raise ParseError("no metric name")
    name = match.group()
    pos = _skip_spaces(line, match.end())
    labels: dict[str, str] = {}
    if line[pos : pos + 1] == "{":
        labels, pos = _parse_labels(line, pos + 1)
    rest = line[pos:].split()
    if len(rest) not in (1, 2):
        raise ParseError(f"expected a value and an optional timestamp after {name}")
    try:
        value = float(rest[0])  # accepts NaN, +Inf, -Inf
        if len(rest) == 2:
            int(rest[1])  # timestamp in ms: validated, not used
    except ValueError:
        raise ParseError(f"bad number in {' '.join(rest)!r}") from None
    return name, labels, value


@dataclass
class _Gpu:
    node: str
    index: int
    uuid: str
    values: dict[str, float] = field(default_factory=dict)

    def get(self, name: str) -> float | None:
        value = self.values.get(name)
        if value is None or math.isnan(value) or math.isinf(value) or abs(value) >= DCGM_BLANK:
            return None
        return value


def _percent(value: float, scale: float = 1.0) -> float:
    return round(min(100.0, max(0.0, value * scale)), 2)


def _to_sample(gpu: _Gpu, now: datetime) -> tuple[GpuSample | None, list[str]]:
    missing: list[str] = []
    compute = gpu.get(SM_ACTIVE)
    compute = _percent(compute, 100) if compute is not None else gpu.get(GPU_UTIL)
    if compute is None:
        missing.append(f"{SM_ACTIVE}/{GPU_UTIL}")
    memory = gpu.get(DRAM_ACTIVE)
    memory = _percent(memory, 100) if memory is not None else gpu.get(MEM_COPY_UTIL)
    if memory is None:
        missing.append(f"{DRAM_ACTIVE}/{MEM_COPY_UTIL}")
    used = gpu.get(FB_USED)
    if used is None:
        missing.append(FB_USED)
    total = gpu.get(FB_TOTAL)
    if total is None:
        free = gpu.get(FB_FREE)
        if free is None:
            missing.append(FB_FREE)
        elif used is not None:
            total = used + free + (gpu.get(FB_RESERVED) or 0.0)
    temperature = gpu.get(GPU_TEMP)
    if temperature is None:
        missing.append(GPU_TEMP)
    power = gpu.get(POWER_USAGE)
    if power is None:
        missing.append(POWER_USAGE)
    if missing:
        return None, [f"{gpu.node} GPU {gpu.index} ({gpu.uuid or 'no UUID'}): no {', '.join(missing)}; skipped"]
    sample = GpuSample(
        time=now,
        node=gpu.node,
        index=gpu.index,
        uuid=gpu.uuid,
        compute_util=_percent(compute),
        memory_util=_percent(memory),
        memory_used_mb=int(round(used)),
        memory_total_mb=int(round(total)),
        temperature_c=float(temperature),
        power_w=round(float(power), 3),
    )
    return sample, []


def parse_dcgm_metrics_with_problems(
    text: str, *, now: datetime, node_override: str | None = None
) -> tuple[list[GpuSample], list[str]]:
    """Parse one DCGM-exporter scrape; returns (samples sorted by node and index, problems).

    ``problems`` names every skipped GPU and what it lacked, unparsable lines, series without a node or GPU
    index, and ignored MIG series. See the module docstring for the field mapping.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    problems: list[str] = []
    gpus: dict[tuple[str, int], _Gpu] = {}
    mig: set[tuple[str, str]] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        try:
            parsed = parse_line(line)
        except ParseError as exc:
            problems.append(f"line {number}: {exc}: {line.strip()[:120]}")
            continue
        if parsed is None or parsed[0] not in WANTED:
            continue
        name, labels, value = parsed
        node = node_override or labels.get("Hostname", "")
        if labels.get("GPU_I_ID"):
            mig.add((node, labels.get("gpu", "?")))
            continue
        if not node:
            problems.append(f"line {number}: {name} has no Hostname label (pass node_override); ignored")
            continue
        try:
            index = int(labels.get("gpu", ""))
        except ValueError:
            problems.append(f"line {number}: {name} has no valid gpu label; ignored")
            continue
        uuid = labels.get("UUID", "")
        gpu = gpus.setdefault((node, index), _Gpu(node, index, uuid))
        if uuid and gpu.uuid and uuid != gpu.uuid:
            problems.append(f"line {number}: {node} GPU {index} has two UUIDs ({gpu.uuid}, {uuid}); kept the first")
            continue
        gpu.uuid = gpu.uuid or uuid
        gpu.values[name] = value
    problems.extend(f"{node} GPU {index}: MIG instance series ignored" for node, index in sorted(mig))
    samples: list[GpuSample] = []
    for key in sorted(gpus):
        gpu = gpus[key]
        if not gpu.uuid:
            problems.append(f"{gpu.node} GPU {gpu.index}: no UUID label; skipped")
            continue
        sample, gpu_problems = _to_sample(gpu, now)
        problems.extend(gpu_problems)
        if sample is not None:
            samples.append(sample)
    return samples, problems


def parse_dcgm_metrics(text: str, *, now: datetime, node_override: str | None = None) -> list[GpuSample]:
    """Parse one DCGM-exporter scrape into GpuSamples; problems (skipped GPUs, bad lines) are logged as warnings.

    Compute prefers DCGM_FI_PROF_SM_ACTIVE (SM activity) over DCGM_FI_DEV_GPU_UTIL, memory prefers
    DCGM_FI_PROF_DRAM_ACTIVE (memory bandwidth) over DCGM_FI_DEV_MEM_COPY_UTIL: they measure what the heatmap's
    tooltips describe. Full mapping in the module docstring.
    """
    samples, problems = parse_dcgm_metrics_with_problems(text, now=now, node_override=node_override)
    for problem in problems:
        log.warning("DCGM metrics: %s", problem)
    return samples


def fetch_dcgm(url: str, timeout: float = 5.0) -> str:
    """GET a DCGM-exporter's metrics text, e.g. ``http://gpu-a100-01:9400/metrics`` (``/metrics`` is added to a
    bare ``http://host:port``). Raises urllib.error.URLError / HTTPError / TimeoutError on failure."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https"):
        raise ValueError(f"DCGM-exporter URL must be http(s)://, not {url!r}")
    if parts.path in ("", "/"):
        url = urllib.parse.urlunsplit(parts._replace(path="/metrics"))
    request = urllib.request.Request(url, headers={"Accept": "text/plain", "User-Agent": "gpupool-portal"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        charset = response.headers.get_content_charset() or "utf-8"
        return response.read().decode(charset, errors="replace")
