"""An HTTP server that answers as one DCGM exporter per node: `GET /nodes/<node>/metrics` gives
that node's GPUs in the exporter's format (telemetry/exposition.py). The dev cluster's emulator is
served this way (`manage.py serve_emulated_dcgm`) for the dev stack's Prometheus, which scrapes
each node's path as its own target, `instance` set to the node (scrape_config below), as it would
scrape `<node>:9400` on real nodes. Tests and bench/prometheus_heatmap.py serve fixed samples."""

from __future__ import annotations

import re
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from telemetry.exposition import render_dcgm_metrics
from telemetry.samples import GpuSample

_PATH = re.compile(r"/nodes/([A-Za-z0-9][A-Za-z0-9._-]{0,99})/metrics")

# node -> the samples its exporter answers with (per scrape)
SamplesOf = Callable[[str], list[GpuSample]]


def exporter_server(address: tuple[str, int], samples: SamplesOf, *, models: dict[str, str], driver: str = ""):
    """A ThreadingHTTPServer (not started) answering each node's path with `samples(node)`."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            match = _PATH.fullmatch(self.path)
            if not match:
                self.send_error(404, "GET /nodes/<node>/metrics")
                return
            node = match.group(1)
            body = render_dcgm_metrics(samples(node), models=models, driver=driver).encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format, *args):  # noqa: A002 - quiet: Prometheus scrapes every few seconds
            pass

    server = ThreadingHTTPServer(address, Handler)
    server.daemon_threads = True
    return server


def scrape_config(nodes: list[str], address: str, *, interval: str = "15s", job: str = "dcgm") -> str:
    """prometheus.yml for the nodes' exporters served at `address` (host:port): one target group a
    node, `instance` the node's exporter as it would be named on a real cluster."""
    groups = "\n".join(
        f"      - targets: ['{address}']\n"
        f"        labels: {{instance: '{node}:9400', __metrics_path__: '/nodes/{node}/metrics'}}"
        for node in nodes
    )
    return (
        f"global:\n  scrape_interval: {interval}\n  evaluation_interval: {interval}\n"
        f"scrape_configs:\n  - job_name: {job}\n    scrape_interval: {interval}\n    static_configs:\n{groups}\n"
    )
