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
* node: the ``Hostname`` label, or ``node_override``; index: ``gpu`` (0-1023); uuid: ``UUID``.

Scraping (``scrape_exporter``): each exporter URL is configured for one node (``DCGM_EXPORTER_URLS`` is
``node=URL`` pairs), and a scrape speaks for that node only. A job that listens on the exporter's port of its
own node (when the exporter is down) cannot report for another node: series whose ``Hostname`` names another
host are dropped (and logged once per host), series without ``Hostname`` (``--no-hostname``) belong to the
configured node. Every read is capped in bytes (``MAX_METRICS_BYTES``) and in total time, headers included.

The PROF (profiling) fields need a datacenter GPU and a collectors file that enables them, so older or default
exporters lack them. A value that is NaN, infinite or one of DCGM's "blank" sentinels (>= 0x7ffffff0, e.g.
9223372036854775794 for "not supported") counts as missing; a missing preferred field falls back to the other
one. A GPU still missing a required value is skipped and named in the problems list. Series of MIG instances
(a non-empty ``GPU_I_ID`` label) are ignored: the heatmap shows whole GPUs. Sample timestamps in the text are
accepted but not used: every sample gets the scrape time ``now``.
"""

from __future__ import annotations

import http.client
import logging
import math
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime

from django.core.exceptions import ImproperlyConfigured
from prometheus_client.parser import text_string_to_metric_families

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
MAX_GPU_INDEX = 1024  # as the agents' ingest accepts
# An 8-GPU exporter with every default field is ~100 KB; MIG instances multiply that a few times.
MAX_METRICS_BYTES = 4 * 1024 * 1024
# Beat scrapes every TELEMETRY_INTERVAL_SECONDS (10 s by default): a read must end well before the next.
FETCH_TIMEOUT_SECONDS = 5.0


class ParseError(ValueError):
    pass


def _too_many_fields(line: str) -> bool:
    """More than a value and a timestamp after the name and labels (the parser ignores more)."""
    after_labels = line[line.rindex("}") + 1 :] if "}" in line else line.split(None, 1)[-1]
    return len(after_labels.split()) > 2


def parse_line(line: str) -> tuple[str, dict[str, str], float] | None:
    """One exposition line -> (metric name, labels, value); None for blank and comment lines.
    Read by prometheus_client's own parser."""
    line = line.strip()
    if not line or line.startswith("#"):
        return None
    try:
        families = list(text_string_to_metric_families(line + "\n"))
    except Exception as exc:  # the parser raises ValueError, and IndexError on some truncations
        raise ParseError(f"not a sample line ({exc or type(exc).__name__})") from None
    if len(families) != 1 or len(families[0].samples) != 1:
        raise ParseError("not one sample")
    if _too_many_fields(line):
        raise ParseError("expected a value and an optional timestamp")
    sample = families[0].samples[0]
    return sample.name, dict(sample.labels), float(sample.value)


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


def same_host(hostname: str, node: str) -> bool:
    """The exporter's host name is the configured node, or that node's fully qualified name."""
    return hostname == node or hostname.split(".", 1)[0] == node


@dataclass
class Parsed:
    samples: list[GpuSample]
    problems: list[str]
    foreign_hosts: set[str]
    # The NVIDIA driver each node's series name (dcgm-exporter's DCGM_FI_DRIVER_VERSION label).
    drivers: dict[str, str]


def _parse(text: str, *, now: datetime, node_override: str | None, expected_node: str | None) -> Parsed:
    problems: list[str] = []
    return collect_series(
        _series_of_lines(text, problems),
        now=now,
        node_override=node_override,
        expected_node=expected_node,
        problems=problems,
    )


def _series_of_lines(text: str, problems: list[str]) -> Iterator[tuple[str, str, dict[str, str], float]]:
    """(where, name, labels, value) of every sample line. The whole text is read at once when it
    is well formed; otherwise line by line, so that one bad line costs only itself and is named."""
    numbered = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    numbered = [(n, line) for n, line in numbered if not line.lstrip().startswith("#")]
    try:
        samples = [sample for family in text_string_to_metric_families(text + "\n") for sample in family.samples]
    except Exception:  # a bad line somewhere: found and named below
        samples = None
    if (
        samples is not None
        and len(samples) == len(numbered)
        and not any(_too_many_fields(line) for _, line in numbered)
    ):
        for (number, _line), sample in zip(numbered, samples, strict=True):
            yield f"line {number}", sample.name, dict(sample.labels), float(sample.value)
        return
    for number, line in numbered:
        try:
            parsed = parse_line(line)
        except ParseError as exc:
            problems.append(f"line {number}: {exc}: {line.strip()[:120]}")
            continue
        if parsed is not None:
            yield f"line {number}", *parsed


def _where(where) -> str:
    return where if isinstance(where, str) else f"series {where}"


def collect_series(
    series: Iterable[tuple[str | int, str, dict[str, str], float]],
    *,
    now: datetime,
    node_override: str | None = None,
    expected_node: str | None = None,
    problems: list[str] | None = None,
) -> Parsed:
    """DCGM series as (where, metric name, labels, value), from an exporter's text or from a
    Prometheus query (telemetry/prometheus.py), into samples by node and GPU. `where` names the
    series in problems: a text ("line 12"), or a number ("series 12")."""
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware (UTC)")
    problems = [] if problems is None else problems
    foreign: set[str] = set()
    gpus: dict[tuple[str, int], _Gpu] = {}
    mig: set[tuple[str, str]] = set()
    drivers: dict[str, str] = {}
    for where, name, labels, value in series:
        if name not in WANTED:
            continue
        hostname = labels.get("Hostname", "")
        if expected_node is not None:
            if hostname and not same_host(hostname, expected_node):
                foreign.add(hostname[:100])
                continue
            node = expected_node
        else:
            node = node_override or hostname
        if labels.get("GPU_I_ID"):
            mig.add((node, labels.get("gpu", "?")))
            continue
        if not node:
            problems.append(f"{_where(where)}: {name} has no Hostname label (pass node_override); ignored")
            continue
        try:
            index = int(labels.get("gpu", ""))
        except ValueError:
            index = -1
        if not 0 <= index < MAX_GPU_INDEX:
            problems.append(f"{_where(where)}: {name} has no valid gpu label (0-{MAX_GPU_INDEX - 1}); ignored")
            continue
        uuid = labels.get("UUID", "")[:100]
        gpu = gpus.setdefault((node, index), _Gpu(node, index, uuid))
        if uuid and gpu.uuid and uuid != gpu.uuid:
            problems.append(f"{_where(where)}: {node} GPU {index} has two UUIDs ({gpu.uuid}, {uuid}); kept the first")
            continue
        gpu.uuid = gpu.uuid or uuid
        gpu.values[name] = value
        if labels.get("DCGM_FI_DRIVER_VERSION"):
            drivers.setdefault(node, labels["DCGM_FI_DRIVER_VERSION"][:40])
    problems.extend(f"{node} GPU {index}: MIG instance series ignored" for node, index in sorted(mig))
    problems.extend(
        f"series of host {host!r} ignored: this exporter is configured for node {expected_node!r}"
        for host in sorted(foreign)
    )
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
    return Parsed(samples, problems, foreign, drivers)


def parse_dcgm_metrics_with_problems(
    text: str, *, now: datetime, node_override: str | None = None
) -> tuple[list[GpuSample], list[str]]:
    """Parse one DCGM-exporter scrape; returns (samples sorted by node and index, problems).

    ``problems`` names every skipped GPU and what it lacked, unparsable lines, series without a node or GPU
    index, and ignored MIG series. See the module docstring for the field mapping. The node comes from the
    ``Hostname`` labels: use ``scrape_exporter`` (or ``parse_node_metrics``) for an exporter whose node is known.
    """
    parsed = _parse(text, now=now, node_override=node_override, expected_node=None)
    return parsed.samples, parsed.problems


def parse_node_metrics(text: str, *, node: str, now: datetime) -> tuple[list[GpuSample], list[str], set[str]]:
    """One scrape of the exporter configured for ``node``: (that node's samples, problems, other hosts seen).

    Series labelled with another host are left out; series without a ``Hostname`` label are the node's.
    """
    parsed = _parse(text, now=now, node_override=None, expected_node=node)
    return parsed.samples, parsed.problems, parsed.foreign_hosts


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


# --- configuration -------------------------------------------------------------------------
_NODE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def _metrics_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"DCGM-exporter URL must be http(s)://host[:port][/path], not {url!r}")
    if parts.path in ("", "/"):
        parts = parts._replace(path="/metrics")
    return urllib.parse.urlunsplit(parts)


def parse_exporter_urls(raw: str) -> dict[str, str]:
    """``DCGM_EXPORTER_URLS``: ``node=URL`` pairs, comma-separated -> {node: metrics URL}.

    The plain URL list of earlier versions is refused: it let the exporter's labels say which node a
    scrape was for, so whatever answered on one node's port could report for any node.
    """
    exporters: dict[str, str] = {}
    for item in (part.strip() for part in raw.split(",")):
        if not item:
            continue
        node, separator, url = item.partition("=")
        node = node.strip()
        if not separator or "://" in node or not _NODE_NAME.fullmatch(node):
            raise ImproperlyConfigured(
                f"DCGM_EXPORTER_URLS: {item!r} is not node=URL. Each exporter is tied to the node it runs on, "
                "e.g. DCGM_EXPORTER_URLS=gpu-a100-01=http://gpu-a100-01:9400/metrics,"
                "gpu-a100-02=http://gpu-a100-02:9400/metrics (a plain list of URLs is no longer accepted)."
            )
        if node in exporters:
            raise ImproperlyConfigured(f"DCGM_EXPORTER_URLS: node {node!r} is listed twice")
        try:
            exporters[node] = _metrics_url(url.strip())
        except ValueError as exc:
            raise ImproperlyConfigured(f"DCGM_EXPORTER_URLS: {node}: {exc}") from None
    return exporters


# --- fetching --------------------------------------------------------------------------------
class FetchError(OSError):
    """The exporter answered, but not with metrics this portal takes (status, size, time)."""


def fetch_dcgm(url: str, timeout: float = FETCH_TIMEOUT_SECONDS, max_bytes: int = MAX_METRICS_BYTES) -> str:
    """GET a DCGM-exporter's metrics text, e.g. ``http://gpu-a100-01:9400/metrics`` (``/metrics`` is added to a
    bare ``http://host:port``).

    Bounded: at most ``max_bytes`` of body and ``timeout`` seconds in all, from connecting to the last byte
    (a server that drips its headers or body is cut off, not waited for byte by byte). Redirects are not
    followed: the URL is the node's exporter, not a pointer to somewhere else. Raises ``FetchError`` (an
    ``OSError``) or another ``OSError`` / ``http.client.HTTPException`` on failure.
    """
    url = _metrics_url(url)
    parts = urllib.parse.urlsplit(url)
    connection_class = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = connection_class(parts.hostname, parts.port, timeout=timeout)
    deadline = time.monotonic() + timeout
    expired = threading.Event()

    opened: list[socket.socket] = []  # the socket, kept: http.client drops its own reference on "close"

    def expire():
        # Unblocks a read in progress: per-read socket timeouts alone would let a server that sends a
        # byte now and then keep the scrape going for ever.
        expired.set()
        for sock in opened:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    watchdog = threading.Timer(timeout, expire)
    watchdog.daemon = True
    watchdog.start()
    response = None
    try:
        connection.connect()
        opened.append(connection.sock)
        if expired.is_set():
            raise TimeoutError(f"no connection within {timeout} s")
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        connection.request("GET", path, headers={"Accept": "text/plain", "User-Agent": "gpupool-portal"})
        response = connection.getresponse()
        if response.status != 200:
            raise FetchError(f"HTTP {response.status} {response.reason}".strip())
        declared = response.getheader("Content-Length")
        if declared and declared.strip().isdigit() and int(declared) > max_bytes:
            raise FetchError(f"the metrics are {int(declared)} bytes, over the limit of {max_bytes}")
        chunks, size = [], 0
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or expired.is_set():
                raise TimeoutError(f"no complete answer within {timeout} s")
            opened[0].settimeout(remaining)
            chunk = response.read1(65536)
            if not chunk:
                break
            size += len(chunk)
            if size > max_bytes:
                raise FetchError(f"the metrics are over the limit of {max_bytes} bytes")
            chunks.append(chunk)
        if expired.is_set():  # the shutdown looks like the end of the body: it is not
            raise TimeoutError(f"no complete answer within {timeout} s")
        charset = response.headers.get_content_charset() or "utf-8"
        try:
            return b"".join(chunks).decode(charset, errors="replace")
        except LookupError:  # a charset Python does not know: the exposition format is UTF-8
            return b"".join(chunks).decode("utf-8", errors="replace")
    except (OSError, http.client.HTTPException):
        if expired.is_set():
            raise TimeoutError(f"no complete answer within {timeout} s") from None
        raise
    finally:
        watchdog.cancel()
        if response is not None:
            response.close()
        connection.close()


# --- scraping ----------------------------------------------------------------------------------
_REPORTED_FOREIGN: set[tuple[str, str]] = set()
_MAX_REPORTED = 10_000


def scrape_exporter(node: str, url: str, now: datetime) -> tuple[list[GpuSample], str]:
    """Read the exporter configured for ``node`` and return that node's samples only, and the
    NVIDIA driver version its series name ("" when they name none).

    Failures are logged and give no samples. Series of other hosts are dropped and logged once per
    (node, host) for the life of the process: they mean a misconfigured exporter, or something else
    answering on the exporter's port.
    """
    try:
        text = fetch_dcgm(url)
    except (OSError, http.client.HTTPException, ValueError) as exc:
        log.warning("DCGM exporter of %s (%s): %s", node, url, exc)
        return [], ""
    parsed = _parse(text, now=now, node_override=None, expected_node=node)
    samples, problems, foreign = parsed.samples, parsed.problems, parsed.foreign_hosts
    for problem in problems:
        if problem.startswith("series of host "):
            continue
        log.warning("DCGM metrics of %s: %s", node, problem)
    for host in sorted(foreign):
        key = (node, host)
        if key in _REPORTED_FOREIGN or len(_REPORTED_FOREIGN) >= _MAX_REPORTED:
            continue
        _REPORTED_FOREIGN.add(key)
        log.warning(
            "DCGM exporter of %s (%s) sent series of host %r: ignored (an exporter speaks only for its own node; "
            "check DCGM_EXPORTER_URLS, or what listens on that port). Logged once.",
            node,
            url,
            host,
        )
    return samples, parsed.drivers.get(node, "")
