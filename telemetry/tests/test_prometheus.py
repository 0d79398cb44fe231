"""GPU telemetry read from a real Prometheus (Debian's package, started by the test) scraping
exporters this process serves in DCGM-exporter's format (telemetry/exporter_server.py)."""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime

import pytest

from telemetry import prometheus
from telemetry.dcgm import parse_dcgm_metrics
from telemetry.exporter_server import exporter_server, scrape_config
from telemetry.exposition import render_dcgm_metrics
from telemetry.models import GpuLatest
from telemetry.samples import GpuSample
from testing.servers import prometheus_server

NOW = datetime(2026, 12, 3, 9, 0, tzinfo=UTC)


def _sample(node: str, index: int, compute: float, used: int, total: int = 40960, power: float = 250.5) -> GpuSample:
    return GpuSample(
        time=NOW,
        node=node,
        index=index,
        uuid=f"GPU-{node}-{index}",
        compute_util=compute,
        memory_util=float(int(compute) // 2),
        memory_used_mb=used,
        memory_total_mb=total,
        temperature_c=61.0,
        power_w=power,
    )


EXPORTED = {
    "gpu-a100-01": [_sample("gpu-a100-01", 0, 87.0, 30000), _sample("gpu-a100-01", 1, 3.0, 400)],
    "gpu-h100-01": [_sample("gpu-h100-01", 0, 55.0, 70000, total=81920, power=610.25)],
    # Something on this node's exporter port that claims to be another node's GPU 1.
    "gpu-4090-01": [_sample("gpu-a100-01", 1, 99.0, 24000)],
}


@contextmanager
def _exporters(samples_of):
    server = exporter_server(("127.0.0.1", 0), samples_of, models={}, driver="550.54.15")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def live_prometheus():
    with _exporters(lambda node: EXPORTED.get(node, [])) as address:
        with prometheus_server(scrape_config(sorted(EXPORTED), address, interval="1s")) as url:
            yield url


def _wait_for_read(url: str):
    """Until every target has been scraped: 4 GPUs' series (the foreign one too), 6 fields each."""
    deadline = time.monotonic() + 60
    while True:
        read = prometheus.read_prometheus(url, NOW)
        if read.series >= 4 * 6 or time.monotonic() > deadline:
            return read
        time.sleep(0.5)


def test_one_query_gives_each_gpu_its_fields_and_a_node_cannot_report_for_another(live_prometheus):
    read = _wait_for_read(live_prometheus)
    by_gpu = {(sample.node, sample.index): sample for sample in read.samples}
    assert sorted(by_gpu) == [("gpu-a100-01", 0), ("gpu-a100-01", 1), ("gpu-h100-01", 0)]
    busy = by_gpu[("gpu-a100-01", 0)]
    assert (busy.compute_util, busy.memory_util, busy.memory_used_mb, busy.memory_total_mb) == (87, 43, 30000, 40960)
    assert busy.uuid == "GPU-gpu-a100-01-0" and busy.time == NOW
    h100 = by_gpu[("gpu-h100-01", 0)]
    assert (h100.memory_total_mb, h100.power_w, h100.temperature_c) == (81920, 610.25, 61.0)
    # GPU 1 of gpu-a100-01 is its own exporter's 3 %, not the 99 % sent from gpu-4090-01's port.
    assert by_gpu[("gpu-a100-01", 1)].compute_util == 3
    assert any("gpu-4090-01's exporter named host 'gpu-a100-01'" in problem for problem in read.problems)
    assert read.drivers == {"gpu-a100-01": "550.54.15", "gpu-h100-01": "550.54.15"}
    # Aggregated to the labels the portal uses: one series per GPU and field, whatever else was scraped.
    assert read.series == 4 * 6


@pytest.mark.django_db
def test_the_beat_task_stores_what_prometheus_holds_and_stores_nothing_when_it_is_gone(live_prometheus, settings):
    from telemetry.tasks import read_prometheus_telemetry

    settings.PROMETHEUS_URL = live_prometheus
    _wait_for_read(live_prometheus)
    assert read_prometheus_telemetry() == 3
    latest = {(row.node, row.index): row for row in GpuLatest.objects.all()}
    assert sorted(latest) == [("gpu-a100-01", 0), ("gpu-a100-01", 1), ("gpu-h100-01", 0)]
    assert {row.source for row in latest.values()} == {"prometheus"}
    assert latest[("gpu-h100-01", 0)].memory_used_mb == 70000

    settings.PROMETHEUS_URL = "http://127.0.0.1:9"  # nothing listens: logged, nothing written, no exception
    GpuLatest.objects.all().delete()
    assert read_prometheus_telemetry() == 0
    assert not GpuLatest.objects.exists()


def test_a_failed_query_or_a_foreign_answer_is_an_error_not_samples():
    answers = iter([b'{"status":"error","errorType":"bad_data","error":"parse error"}', b"<html>proxy</html>"])

    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            body = next(answers)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(prometheus.PrometheusError, match="parse error"):
            prometheus.read_prometheus(url, NOW)
        with pytest.raises(prometheus.PrometheusError, match="not JSON"):
            prometheus.read_prometheus(url, NOW)
    finally:
        server.shutdown()
        server.server_close()


def test_the_exposition_parses_back_to_the_same_samples():
    samples = [*EXPORTED["gpu-a100-01"], *EXPORTED["gpu-h100-01"]]
    text = render_dcgm_metrics(samples, models={"gpu-a100-01": 'NVIDIA "A100"'}, driver="550.54.15")
    assert parse_dcgm_metrics(text, now=NOW) == samples


def test_the_node_is_the_scraped_instance_without_port_or_domain():
    assert prometheus.instance_node("gpu-a100-01:9400") == "gpu-a100-01"
    assert prometheus.instance_node("gpu-a100-01.cluster.example:9400") == "gpu-a100-01"
    assert prometheus.instance_node("") == ""
    query = prometheus.dcgm_query('job="dcgm"')
    assert query.startswith("max by (__name__, instance, Hostname,") and 'job="dcgm"' in query
    assert "DCGM_FI_DEV_GPU_UTIL" in query and "DCGM_FI_DEV_POWER_USAGE" in query
    with pytest.raises(ValueError):
        prometheus.query_url("file:///etc/passwd", query)
