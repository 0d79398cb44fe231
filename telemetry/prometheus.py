"""GPU telemetry read from a site's Prometheus, where DCGM exporters are already scraped.

One instant query a read, whatever the GPU count: the DCGM fields the portal maps
(telemetry/dcgm.py, WANTED), aggregated down to the labels it uses, so the answer carries one
small series per GPU and field instead of every label the exporter and the scrape config add:

    max by (__name__, instance, Hostname, gpu, UUID, GPU_I_ID, DCGM_FI_DRIVER_VERSION)
        ({__name__=~"DCGM_FI_DEV_GPU_UTIL|...", <PROMETHEUS_DCGM_MATCHERS>})

Which node a series speaks for comes from Prometheus's `instance` label (the target it scraped,
`gpu-a100-01:9400` -> `gpu-a100-01`), as a direct scrape takes it from DCGM_EXPORTER_URLS: a
series whose exporter `Hostname` names another host is dropped, so whatever answers on one node's
exporter port cannot report for another node. The answer is bounded in bytes and time
(telemetry.dcgm.fetch_dcgm); a failed read stores nothing and the next one tries again.

The beat reads every PROMETHEUS_READ_SECONDS (15 s) into the same store as the agents, so the
heatmap, history and alerts work unchanged (source "prometheus").
"""

from __future__ import annotations

import http.client
import json
import logging
import urllib.parse
from dataclasses import dataclass
from datetime import datetime

from telemetry.dcgm import WANTED, collect_series, fetch_dcgm, same_host
from telemetry.samples import GpuSample

log = logging.getLogger(__name__)

# 2,048 GPUs x 6 fields at ~200 bytes a series is ~2.5 MB; room for a few times that.
MAX_ANSWER_BYTES = 32 * 1024 * 1024
TIMEOUT_SECONDS = 5.0
GROUPED_BY = ("__name__", "instance", "Hostname", "gpu", "UUID", "GPU_I_ID", "DCGM_FI_DRIVER_VERSION")


class PrometheusError(Exception):
    """Prometheus did not answer with a vector this reader takes; the message says why."""


@dataclass
class PrometheusRead:
    samples: list[GpuSample]
    problems: list[str]
    drivers: dict[str, str]
    series: int


def dcgm_query(matchers: str = "") -> str:
    names = "|".join(sorted(WANTED))
    selector = f'__name__=~"{names}"' + (f", {matchers}" if matchers else "")
    return f"max by ({', '.join(GROUPED_BY)}) ({{{selector}}})"


def query_url(base_url: str, query: str) -> str:
    parts = urllib.parse.urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"PROMETHEUS_URL must be http(s)://host[:port][/prefix], not {base_url!r}")
    path = parts.path.rstrip("/") + "/api/v1/query"
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, path, urllib.parse.urlencode({"query": query}), ""))


def instance_node(instance: str) -> str:
    """`gpu-a100-01:9400`, `gpu-a100-01.cluster.example:9400` or `[fe80::1]:9400` -> the host's
    short name (Slurm's node names carry no domain)."""
    host = urllib.parse.urlsplit(f"//{instance}").hostname or ""
    return host if ":" in host else host.split(".", 1)[0]


def read_prometheus(base_url: str, now: datetime, *, matchers: str = "") -> PrometheusRead:
    """One query, its vector mapped to samples. Raises PrometheusError, OSError or HTTPException."""
    text = fetch_dcgm(query_url(base_url, dcgm_query(matchers)), timeout=TIMEOUT_SECONDS, max_bytes=MAX_ANSWER_BYTES)
    try:
        answer = json.loads(text)
    except ValueError as exc:
        raise PrometheusError(f"the answer is not JSON: {exc}") from None
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise PrometheusError(f"the query failed: {str(error or answer)[:200]}")
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PrometheusError("the answer is not an instant vector")
    problems: list[str] = []
    foreign: set[tuple[str, str]] = set()
    series = []
    nodes: dict[str, str] = {}  # instance -> node: a few hundred targets, 12,288 series at 2,048 GPUs
    for number, item in enumerate(data["result"], start=1):
        try:
            labels = item["metric"]
            value = float(item["value"][1])
            instance, hostname = labels.get("instance", ""), labels.get("Hostname", "")
            if not (isinstance(instance, str) and isinstance(hostname, str)):
                raise TypeError
        except (KeyError, IndexError, TypeError, ValueError, AttributeError):
            problems.append(f"series {number}: not a metric and a value; ignored")
            continue
        node = nodes.get(instance)
        if node is None:
            node = nodes[instance] = instance_node(instance)
        if not node:
            problems.append(f"series {number}: no instance label; ignored")
            continue
        if hostname and hostname != node and not same_host(hostname, node):
            foreign.add((node, hostname[:100]))
            continue
        labels["Hostname"] = node
        series.append((number, labels.pop("__name__", ""), labels, value))
    parsed = collect_series(series, now=now, problems=problems)
    problems.extend(
        f"series from {node}'s exporter named host {host!r}: ignored (an exporter speaks only for its own node)"
        for node, host in sorted(foreign)
    )
    return PrometheusRead(parsed.samples, parsed.problems, parsed.drivers, len(data["result"]))


def read_and_log(base_url: str, now: datetime, *, matchers: str = "") -> PrometheusRead | None:
    """read_prometheus, its problems logged; None (logged) when Prometheus could not be read."""
    try:
        read = read_prometheus(base_url, now, matchers=matchers)
    except (PrometheusError, OSError, http.client.HTTPException, ValueError) as exc:
        log.warning("Prometheus at %s not read: %s", base_url, exc)
        return None
    for problem in read.problems[:20]:
        log.warning("Prometheus DCGM series: %s", problem)
    return read
