"""DCGM-exporter metrics -> GpuSample, on exporter output captured in telemetry/tests/data/."""

from __future__ import annotations

import http.server
import logging
import os
import re
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from telemetry.dcgm import (
    FetchError,
    ParseError,
    fetch_dcgm,
    parse_dcgm_metrics,
    parse_dcgm_metrics_with_problems,
    parse_exporter_urls,
    parse_line,
    parse_node_metrics,
    scrape_exporter,
)
from telemetry.samples import GpuSample

DATA = Path(__file__).parent / "data"
NOW = datetime(2026, 5, 9, 7, 35, 20, tzinfo=UTC)


def load(name: str) -> str:
    return (DATA / name).read_text()


def by_index(samples: list[GpuSample]) -> dict[int, GpuSample]:
    return {s.index: s for s in samples}


def test_a100_with_prof_metrics_values_node_index_uuid():
    samples, problems = parse_dcgm_metrics_with_problems(load("dcgm_a100_prof.prom"), now=NOW)
    assert problems == []
    assert [s.index for s in samples] == [0, 1, 2, 3]
    assert {s.node for s in samples} == {"gpu-a100-01"}
    assert all(s.time == NOW for s in samples)
    gpu0 = by_index(samples)[0]
    assert gpu0 == GpuSample(
        time=NOW,
        node="gpu-a100-01",
        index=0,
        uuid="GPU-3d1b5c9e-7a2f-4c61-9b0e-2f8e1a6d4c01",
        compute_util=87.34,  # PROF_SM_ACTIVE 0.873412, not GPU_UTIL 100
        memory_util=40.22,  # PROF_DRAM_ACTIVE 0.402231, not MEM_COPY_UTIL 38
        memory_used_mb=30000,
        memory_total_mb=40960,  # used 30000 + free 10430 + reserved 530
        temperature_c=65.0,
        power_w=250.512,
    )
    assert by_index(samples)[3].uuid == "GPU-5e7d3f19-9a8b-4c7d-b6e5-f4a3b2c1d004"
    assert all(s.memory_total_mb == 40960 for s in samples)


def test_sm_active_is_preferred_over_gpu_util():
    """GPU 1 has GPU_UTIL 100 (a kernel always running) but its SMs are only 12 % busy: the heatmap must say 12."""
    gpu1 = by_index(parse_dcgm_metrics(load("dcgm_a100_prof.prom"), now=NOW))[1]
    assert gpu1.compute_util == pytest.approx(12.45)
    assert gpu1.memory_util == pytest.approx(5.1)
    idle = by_index(parse_dcgm_metrics(load("dcgm_a100_prof.prom"), now=NOW))[2]
    assert (idle.compute_util, idle.memory_util, idle.memory_used_mb) == (0.0, 0.0, 0)


def test_older_exporter_without_prof_uses_gpu_util_and_mem_copy_util():
    samples, problems = parse_dcgm_metrics_with_problems(load("dcgm_v100_legacy.prom"), now=NOW)
    assert problems == []
    gpus = by_index(samples)
    assert gpus[0] == GpuSample(
        time=NOW,
        node="gpu-v100-03",
        index=0,
        uuid="GPU-604ac76c-d9cf-fef3-62e9-d92044ab6e52",
        compute_util=93.0,
        memory_util=61.0,
        memory_used_mb=28160,
        memory_total_mb=32510,  # no FB_RESERVED in old exporters: used + free
        temperature_c=57.0,
        power_w=212.344,
    )
    assert gpus[1].compute_util == 0.0 and gpus[1].memory_total_mb == 32510


def test_lost_gpu_is_skipped_and_reported_nan_prof_falls_back():
    samples, problems = parse_dcgm_metrics_with_problems(load("dcgm_h100_lost_gpu.prom"), now=NOW)
    assert [s.index for s in samples] == [0, 1, 3]
    assert len(problems) == 1
    problem = problems[0]
    assert "gpu-h100-02 GPU 2" in problem and "GPU-7c6b5a49-3827-4165-9a8b-c7d6e5f4a363" in problem
    # blank sentinel temperature and NaN power count as missing, like the absent fields
    for name in ("DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_GPU_UTIL"):
        assert name in problem
    gpus = by_index(samples)
    # GPU 1: profiling fields are NaN (profiling paused) -> GPU_UTIL / MEM_COPY_UTIL
    assert (gpus[1].compute_util, gpus[1].memory_util) == (88.0, 35.0)
    assert gpus[1].memory_total_mb == 81559 and gpus[1].memory_used_mb == 78872
    assert gpus[0].compute_util == pytest.approx(78.15)


def test_parse_dcgm_metrics_logs_the_problems(caplog):
    with caplog.at_level(logging.WARNING, logger="telemetry.dcgm"):
        samples = parse_dcgm_metrics(load("dcgm_h100_lost_gpu.prom"), now=NOW)
    assert len(samples) == 3
    assert "gpu-h100-02 GPU 2" in caplog.text


def test_node_override_replaces_hostname():
    samples = parse_dcgm_metrics(load("dcgm_v100_legacy.prom"), now=NOW, node_override="v100-node-3")
    assert {s.node for s in samples} == {"v100-node-3"}


def test_escaped_label_values_comments_timestamps_and_spacing():
    name, labels, value = parse_line(
        r'DCGM_FI_DEV_GPU_TEMP{gpu="0",modelName="Odd \"quoted\" \\ name\nline2" , Hostname="h1",} 65 1715240120000'
    )
    assert name == "DCGM_FI_DEV_GPU_TEMP" and value == 65.0
    assert labels == {"gpu": "0", "modelName": 'Odd "quoted" \\ name\nline2', "Hostname": "h1"}
    assert parse_line("# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).") is None
    assert parse_line("# TYPE DCGM_FI_DEV_GPU_TEMP gauge") is None
    assert parse_line("   ") is None
    assert parse_line("up 1") == ("up", {}, 1.0)
    assert parse_line('m{a="}{,="} -Inf')[1] == {"a": "}{,="}
    for bad in ('m{a="x} 1', "m{a=x} 1", "m{a} 1", "m 1 2 3", "m abc", '{a="1"} 1', 'm{a="1" b="2"} 1'):
        with pytest.raises(ParseError):
            parse_line(bad)


def test_nan_and_escaping_through_the_whole_parser():
    labels = 'gpu="0",UUID="GPU-x",Hostname="node \\"a\\""'
    text = "\n".join(
        [
            f"DCGM_FI_PROF_SM_ACTIVE{{{labels}}} NaN",
            f"DCGM_FI_DEV_GPU_UTIL{{{labels}}} 41 1715240120000",
            f"DCGM_FI_PROF_DRAM_ACTIVE{{{labels}}} 0.5",
            f"DCGM_FI_DEV_MEM_COPY_UTIL{{{labels}}} 9",
            f"DCGM_FI_DEV_FB_USED{{{labels}}} 100",
            f"DCGM_FI_DEV_FB_FREE{{{labels}}} 900",
            f"DCGM_FI_DEV_GPU_TEMP{{{labels}}} 40",
            f"DCGM_FI_DEV_POWER_USAGE{{{labels}}} 60.5",
            "this is not a metric line {",
        ]
    )
    samples, problems = parse_dcgm_metrics_with_problems(text, now=NOW)
    (sample,) = samples
    assert sample.node == 'node "a"'
    assert sample.compute_util == 41.0  # SM_ACTIVE NaN -> GPU_UTIL
    assert sample.memory_util == 50.0  # DRAM_ACTIVE 0.5 -> 50 %
    assert sample.memory_total_mb == 1000
    assert len(problems) == 1 and problems[0].startswith("line 9:")


def test_fb_total_mig_series_missing_hostname_and_uuid_conflicts():
    base = 'gpu="0",UUID="GPU-a",Hostname="n1"'
    lines = [
        f"DCGM_FI_DEV_GPU_UTIL{{{base}}} 10",
        f"DCGM_FI_DEV_MEM_COPY_UTIL{{{base}}} 20",
        f"DCGM_FI_DEV_FB_USED{{{base}}} 100",
        f"DCGM_FI_DEV_FB_FREE{{{base}}} 1",
        f"DCGM_FI_DEV_FB_TOTAL{{{base}}} 1024",
        f"DCGM_FI_DEV_GPU_TEMP{{{base}}} 30",
        f"DCGM_FI_DEV_POWER_USAGE{{{base}}} 70",
        f'DCGM_FI_DEV_GPU_UTIL{{{base},GPU_I_PROFILE="1g.5gb",GPU_I_ID="7"}} 99',
        'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-b",Hostname="n1"} 55',
        'DCGM_FI_DEV_GPU_UTIL{gpu="1",UUID="GPU-c"} 55',
        'DCGM_FI_DEV_GPU_UTIL{gpu="nvidia1",UUID="GPU-c",Hostname="n1"} 55',
    ]
    samples, problems = parse_dcgm_metrics_with_problems("\n".join(lines), now=NOW)
    (sample,) = samples
    assert (sample.compute_util, sample.memory_total_mb) == (10.0, 1024)  # FB_TOTAL wins, MIG series ignored
    text = "\n".join(problems)
    assert "two UUIDs" in text and "no Hostname" in text and "no valid gpu label" in text and "MIG" in text


def test_now_must_be_aware():
    with pytest.raises(ValueError):
        parse_dcgm_metrics("", now=datetime(2026, 5, 9))


@pytest.fixture
def metrics_server():
    body = load("dcgm_a100_prof.prom").encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path != "/metrics":
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_fetch_dcgm_over_http(metrics_server):
    text = fetch_dcgm(metrics_server, timeout=5)  # bare host:port -> /metrics
    assert len(parse_dcgm_metrics(text, now=NOW)) == 4
    assert fetch_dcgm(metrics_server + "/metrics") == text


def test_fetch_dcgm_refuses_other_schemes():
    with pytest.raises(ValueError):
        fetch_dcgm("file:///etc/passwd")


# --- exporters tied to their node ------------------------------------------------------------
def test_exporter_urls_are_node_url_pairs():
    raw = "gpu-a100-01=http://gpu-a100-01:9400, gpu-h100-01=https://10.0.0.7:9400/metrics?collect=a=b ,"
    assert parse_exporter_urls(raw) == {
        "gpu-a100-01": "http://gpu-a100-01:9400/metrics",
        "gpu-h100-01": "https://10.0.0.7:9400/metrics?collect=a=b",
    }
    assert parse_exporter_urls("") == {}


@pytest.mark.parametrize(
    "raw, message",
    [
        ("http://gpu-a100-01:9400/metrics", "not node=URL"),  # the old plain list
        ("http://gpu-a100-01:9400/metrics?x=1", "not node=URL"),  # a "=" in the URL is no node
        ("gpu-a100-01=http://a:9400,gpu-a100-01=http://b:9400", "listed twice"),
        ("gpu-a100-01=file:///etc/passwd", "http(s)://"),
        ("gpu a100=http://a:9400", "not node=URL"),
        ("=http://a:9400", "not node=URL"),
    ],
)
def test_malformed_exporter_settings_stop_the_start_with_a_clear_message(raw, message):
    with pytest.raises(ImproperlyConfigured, match=re.escape(message)):
        parse_exporter_urls(raw)


def test_the_settings_refuse_the_old_plain_list(tmp_path):
    """The real settings module, in a process of its own: the old form stops the start."""
    env = {**os.environ, "DEBUG": "1", "DCGM_EXPORTER_URLS": "http://gpu-a100-01:9400/metrics"}
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**env, "DJANGO_SETTINGS_MODULE": "gpupool.settings"},
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "gpu-a100-01=http://gpu-a100-01:9400/metrics" in result.stderr


def test_a_scrape_keeps_only_the_configured_nodes_series():
    own, problems, foreign = parse_node_metrics(load("dcgm_a100_prof.prom"), node="gpu-a100-01", now=NOW)
    assert [s.index for s in own] == [0, 1, 2, 3] and foreign == set() and problems == []
    # The same page at another node's URL (a job answering on that node's exporter port): nothing.
    other, problems, foreign = parse_node_metrics(load("dcgm_a100_prof.prom"), node="gpu-a100-02", now=NOW)
    assert other == [] and foreign == {"gpu-a100-01"}
    assert problems == ["series of host 'gpu-a100-01' ignored: this exporter is configured for node 'gpu-a100-02'"]


def test_series_without_hostname_are_the_nodes_and_a_qualified_name_matches():
    text = load("dcgm_v100_legacy.prom")
    unlabelled = re.sub(r',\s*Hostname="[^"]*"', "", text)
    samples, _, foreign = parse_node_metrics(unlabelled, node="v100-3", now=NOW)
    assert {s.node for s in samples} == {"v100-3"} and len(samples) == 2 and not foreign
    qualified = text.replace('Hostname="gpu-v100-03"', 'Hostname="gpu-v100-03.cluster.example.org"')
    samples, _, foreign = parse_node_metrics(qualified, node="gpu-v100-03", now=NOW)
    assert {s.node for s in samples} == {"gpu-v100-03"} and len(samples) == 2 and not foreign


def test_a_page_mixing_hosts_gives_only_the_nodes_gpus():
    mixed = load("dcgm_a100_prof.prom") + "\n" + load("dcgm_h100_lost_gpu.prom")
    samples, _, foreign = parse_node_metrics(mixed, node="gpu-h100-02", now=NOW)
    assert {s.node for s in samples} == {"gpu-h100-02"} and [s.index for s in samples] == [0, 1, 3]
    assert foreign == {"gpu-a100-01"}


def test_gpu_indexes_are_bounded_like_the_agents():
    line = 'DCGM_FI_DEV_GPU_UTIL{gpu="4096",UUID="GPU-x",Hostname="n1"} 10'
    samples, problems = parse_dcgm_metrics_with_problems(line, now=NOW)
    assert samples == [] and "no valid gpu label" in problems[0]


def test_foreign_series_are_logged_once_per_host(metrics_server, caplog, monkeypatch):
    monkeypatch.setattr("telemetry.dcgm._REPORTED_FOREIGN", set())
    with caplog.at_level(logging.WARNING, logger="telemetry.dcgm"):
        for _ in range(3):
            assert scrape_exporter("gpu-h100-01", metrics_server, NOW) == ([], "")
    warnings = [r for r in caplog.records if "gpu-a100-01" in r.getMessage()]
    assert len(warnings) == 1 and "ignored" in warnings[0].getMessage()
    samples, driver = scrape_exporter("gpu-a100-01", metrics_server, NOW)
    assert len(samples) == 4
    # The driver as dcgm-exporter labels every series (captured from a real exporter).
    assert driver and driver == _label_in(load("dcgm_a100_prof.prom"), "DCGM_FI_DRIVER_VERSION")


@pytest.mark.django_db
def test_the_beat_task_stores_each_exporters_own_node_only(metrics_server, settings):
    from telemetry.models import GpuLatest
    from telemetry.tasks import scrape_dcgm

    # One real exporter of gpu-a100-01, also configured (wrongly, or hijacked) as gpu-h100-01's.
    settings.DCGM_EXPORTER_URLS = {"gpu-a100-01": metrics_server, "gpu-h100-01": metrics_server + "/metrics"}
    assert scrape_dcgm() == 4
    assert sorted(GpuLatest.objects.values_list("node", "index")) == [("gpu-a100-01", i) for i in range(4)]


# --- every read is capped ----------------------------------------------------------------------
@pytest.fixture
def hostile_server():
    """An exporter port answered by something hostile; the path chooses how."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            try:
                if self.path == "/huge-declared":
                    self.send_response(200)
                    self.send_header("Content-Length", str(10**12))
                    self.end_headers()
                    self.wfile.write(b"x" * 1000)
                elif self.path == "/endless":
                    self.send_response(200)
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    piece = b"x" * 65536
                    while True:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
                elif self.path == "/drip":
                    self.wfile.write(b"HTTP/1.1 200 OK\r\n")
                    for _ in range(200):  # a header byte every 0.1 s: each read is quick, the whole is not
                        self.wfile.write(b"X")
                        self.wfile.flush()
                        time.sleep(0.1)
                elif self.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", "http://169.254.169.254/latest/meta-data/")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
            except OSError:  # the client hung up, as it should
                pass

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_declared_length_over_the_cap_is_refused_before_reading(hostile_server):
    started = time.monotonic()
    with pytest.raises(FetchError, match="over the limit"):
        fetch_dcgm(hostile_server + "/huge-declared", timeout=5)
    assert time.monotonic() - started < 1


def test_an_endless_body_stops_at_the_byte_cap(hostile_server):
    with pytest.raises(FetchError, match="over the limit of 1000000 bytes"):
        fetch_dcgm(hostile_server + "/endless", timeout=5, max_bytes=1_000_000)


def test_a_dripping_server_is_cut_off_at_the_total_timeout(hostile_server):
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        fetch_dcgm(hostile_server + "/drip", timeout=1)
    assert time.monotonic() - started < 2


def test_redirects_are_not_followed(hostile_server):
    with pytest.raises(FetchError, match="HTTP 302"):
        fetch_dcgm(hostile_server + "/redirect", timeout=5)


def _label_in(text: str, label: str) -> str:
    return re.search(label + r'="([^"]+)"', text)[1]
