"""The standalone NVML node agent (telemetry/agent/gpupool_agent.py), with a fake NVML and a local HTTP server."""

from __future__ import annotations

import ast
import http.server
import io
import json
import logging
import socket
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace

import pynvml
import pytest

from telemetry.agent import gpupool_agent as agent

AGENT_FILE = Path(agent.__file__)
MIB = 1024 * 1024
NOW = datetime(2026, 5, 9, 7, 35, 20, tzinfo=UTC)


class FakeNvml:
    """Same function names and error behaviour as pynvml, for 4 A100s; ``fail`` = {(index, function): code}."""

    NVMLError = pynvml.NVMLError
    NVML_TEMPERATURE_GPU = pynvml.NVML_TEMPERATURE_GPU

    GPUS = [
        # uuid, util.gpu, util.memory, used bytes, total bytes, temp C, power mW
        ("GPU-3d1b5c9e-7a2f-4c61-9b0e-2f8e1a6d4c01", 87, 40, 30000 * MIB + 12345, 40960 * MIB, 65, 250512),
        ("GPU-8f2a0b7d-1c3e-4d5f-a6b7-c8d9e0f1a202", 12, 5, 38912 * MIB, 40960 * MIB, 48, 96031),
        ("GPU-c41e9a35-5b6d-4e7f-8091-a2b3c4d5e603", 0, 0, 0, 40960 * MIB, 31, 54000),
        ("GPU-5e7d3f19-9a8b-4c7d-b6e5-f4a3b2c1d004", 97, 71, 39800 * MIB, 40960 * MIB, 71, 389904),
    ]

    def __init__(self, fail: dict | None = None, init_error: int | None = None):
        self.fail = fail or {}
        self.init_error = init_error
        self.initialised = False
        self.init_calls = 0

    def _check(self, index, function):
        code = self.fail.get((index, function))
        if code is not None:
            raise pynvml.NVMLError(code)

    def nvmlInit(self):
        self.init_calls += 1
        if self.init_error is not None:
            raise pynvml.NVMLError(self.init_error)
        self.initialised = True

    def nvmlDeviceGetCount(self):
        if not self.initialised:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNINITIALIZED)
        return len(self.GPUS)

    def nvmlDeviceGetHandleByIndex(self, index):
        self._check(index, "handle")
        return index

    def nvmlDeviceGetUUID(self, handle):
        self._check(handle, "uuid")
        return self.GPUS[handle][0]

    def nvmlDeviceGetUtilizationRates(self, handle):
        self._check(handle, "util")
        return SimpleNamespace(gpu=self.GPUS[handle][1], memory=self.GPUS[handle][2])

    def nvmlDeviceGetMemoryInfo(self, handle):
        self._check(handle, "memory")
        used, total = self.GPUS[handle][3], self.GPUS[handle][4]
        return SimpleNamespace(used=used, total=total, free=total - used)

    def nvmlDeviceGetTemperature(self, handle, sensor):
        assert sensor == pynvml.NVML_TEMPERATURE_GPU
        self._check(handle, "temp")
        return self.GPUS[handle][5]

    def nvmlDeviceGetPowerUsage(self, handle):
        self._check(handle, "power")
        return self.GPUS[handle][6]

    def nvmlSystemGetDriverVersion(self):
        self._check(None, "driver")
        return "550.54.15"


# ------------------------------------------------------------------------------------------------- reading


def test_read_gpus_converts_units_and_reports_a_failing_gpu_as_an_error():
    nvml = FakeNvml(fail={(3, "util"): pynvml.NVML_ERROR_GPU_IS_LOST})
    samples, errors = agent.read_gpus(nvml, NOW)
    assert [s["index"] for s in samples] == [0, 1, 2]
    assert samples[0] == {
        "time": "2026-05-09T07:35:20+00:00",
        "index": 0,
        "uuid": "GPU-3d1b5c9e-7a2f-4c61-9b0e-2f8e1a6d4c01",
        "compute_util": 87.0,
        "memory_util": 40.0,
        "memory_used_mb": 30000,  # bytes -> MiB, rounded down
        "memory_total_mb": 40960,
        "temperature_c": 65.0,
        "power_w": 250.512,  # mW -> W
    }
    assert samples[2]["power_w"] == 54.0 and samples[2]["memory_used_mb"] == 0
    assert errors == [
        {"time": "2026-05-09T07:35:20+00:00", "index": 3, "message": "nvmlDeviceGetUtilizationRates: GPU is lost"}
    ]
    assert all(isinstance(s[k], float) for s in samples for k in ("compute_util", "memory_util", "power_w"))
    assert all(isinstance(s[k], int) for s in samples for k in ("memory_used_mb", "memory_total_mb"))


def test_read_gpus_initialises_nvml_once_and_handles_any_failing_call():
    nvml = FakeNvml(fail={(0, "handle"): pynvml.NVML_ERROR_UNKNOWN, (2, "power"): pynvml.NVML_ERROR_NOT_SUPPORTED})
    samples, errors = agent.read_gpus(nvml)
    agent.read_gpus(nvml)
    assert nvml.init_calls == 1
    assert [s["index"] for s in samples] == [1, 3]
    assert [(e["index"], e["message"]) for e in errors] == [
        (0, "nvmlDeviceGetHandleByIndex: Unknown Error"),
        (2, "nvmlDeviceGetPowerUsage: Not Supported"),
    ]


def test_nvml_unavailable_is_a_clear_error_and_a_node_level_entry():
    nvml = FakeNvml(init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    with pytest.raises(agent.NvmlUnavailable, match="NVML not available: Driver Not Loaded"):
        agent.read_gpus(nvml)
    entry = agent.sample_round(nvml, NOW)
    assert entry["samples"] == []
    assert entry["errors"][0]["index"] is None and "NVML not available" in entry["errors"][0]["message"]


def test_real_pynvml_gives_nvml_not_available_here_or_real_samples_on_a_gpu_node():
    """No driver on CI: a clear NvmlUnavailable, not a traceback. On a GPU node the same call reads real GPUs."""
    try:
        samples, errors = agent.read_gpus(pynvml)
    except agent.NvmlUnavailable as exc:
        assert str(exc).startswith("NVML not available: ")
        assert "nvidia-smi" in str(exc)
        return
    assert samples or errors
    for sample in samples:
        assert sample["uuid"].startswith(("GPU-", "MIG-"))
        assert 0 <= sample["compute_util"] <= 100 and 0 < sample["memory_total_mb"]


# ------------------------------------------------------------------------------------------------- token


def write_token(tmp_path: Path, text: str = "tok-123\n", mode: int = 0o600) -> Path:
    path = tmp_path / "token"
    path.write_text(text)
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o660])
def test_token_file_open_to_group_or_others_is_refused(tmp_path, mode):
    path = write_token(tmp_path, mode=mode)
    with pytest.raises(agent.ConfigError, match=f"mode {mode:04o}.*chmod 600"):
        agent.read_token(str(path))


def test_token_file_ok_missing_empty_and_garbage(tmp_path):
    assert agent.read_token(str(write_token(tmp_path, "  tok-123 \n", 0o600))) == "tok-123"
    assert agent.read_token(str(write_token(tmp_path, "tok-123", 0o400))) == "tok-123"
    with pytest.raises(agent.ConfigError, match="does not exist"):
        agent.read_token(str(tmp_path / "nope"))
    with pytest.raises(agent.ConfigError, match="exactly one token"):
        agent.read_token(str(write_token(tmp_path, "\n", 0o600)))
    with pytest.raises(agent.ConfigError, match="exactly one token"):
        agent.read_token(str(write_token(tmp_path, "a b", 0o600)))
    with pytest.raises(agent.ConfigError, match="HTTP header"):
        agent.read_token(str(write_token(tmp_path, "tök", 0o600)))
    with pytest.raises(agent.ConfigError, match="not a regular file"):
        agent.read_token(str(tmp_path))


def test_main_refuses_to_start_with_a_readable_token_file(tmp_path, capsys):
    path = write_token(tmp_path, mode=0o644)
    rc = agent.main(["--url", "http://127.0.0.1:9", "--token-file", str(path), "--once"], nvml=FakeNvml())
    assert rc == 2
    assert "must not be readable or writable by group or others" in capsys.readouterr().err


def test_main_argument_checks():
    with pytest.raises(SystemExit) as exc:
        agent.main(["--once"], nvml=FakeNvml())
    assert exc.value.code == 2
    with pytest.raises(SystemExit):
        agent.main(["--url", "ftp://x", "--token-file", "/x", "--once"], nvml=FakeNvml())
    with pytest.raises(SystemExit):
        agent.main(["--dry-run", "--interval", "0"], nvml=FakeNvml())


# ------------------------------------------------------------------------------------------------ buffer


def test_batcher_keeps_oldest_first_and_drops_beyond_the_bound():
    batcher = agent.Batcher(max_rounds=3, per_post=2)
    assert [batcher.add({"n": n}) for n in range(5)] == [False, False, False, True, True]
    assert len(batcher) == 3 and batcher.dropped_total == 2 and batcher.dropped_since_success == 2
    assert batcher.peek() == [{"n": 2}, {"n": 3}]
    batcher.discard(2)
    assert batcher.peek() == [{"n": 4}]
    with pytest.raises(ValueError):
        agent.Batcher(max_rounds=0)


def test_a_round_carries_the_driver_and_a_payload_the_newest_rounds():
    fake = FakeNvml()
    fake.nvmlInit()
    entry = agent.sample_round(fake, NOW)
    assert entry["driver"] == "550.54.15" and len(entry["samples"]) == 4
    older = {"samples": [], "errors": [], "driver": "535.104.05"}
    assert agent.build_payload("n1", [older, entry])["driver_version"] == "550.54.15"
    # A driver NVML cannot name is left out, never made up.
    silent = FakeNvml(fail={(None, "driver"): pynvml.NVML_ERROR_UNKNOWN})
    silent.nvmlInit()
    assert "driver_version" not in agent.build_payload("n1", [agent.sample_round(silent, NOW)])


def test_build_payload_merges_rounds_oldest_first():
    rounds = [
        {"samples": [{"time": "t1", "index": 0}], "errors": []},
        {"samples": [{"time": "t2", "index": 0}], "errors": [{"time": "t2", "index": 1, "message": "x"}]},
    ]
    payload = agent.build_payload("n1", rounds)
    assert list(payload) == ["node", "agent", "samples", "errors"]
    assert payload["node"] == "n1" and payload["agent"] == "nvml"
    assert [s["time"] for s in payload["samples"]] == ["t1", "t2"] and len(payload["errors"]) == 1


# ------------------------------------------------------------------------------------------------- HTTP


class IngestServer:
    """A real HTTP server on 127.0.0.1 (ephemeral port) answering with scripted statuses; records requests."""

    def __init__(self):
        self.script: list[tuple[int, str]] = []
        self.default = (202, None)
        self.requests: list[dict] = []
        self.delay = 0.0
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                payload = json.loads(body)
                outer.requests.append({"path": self.path, "headers": dict(self.headers), "payload": payload})
                if outer.delay:
                    threading.Event().wait(outer.delay)
                status, text = outer.script.pop(0) if outer.script else outer.default
                if text is None:
                    text = json.dumps({"accepted": len(payload["samples"])})
                data = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except BrokenPipeError:  # the client timed out (test_send_..._timeout)
                    pass

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.guard = threading.Timer(120, self.server.shutdown)  # stops by itself even if a test hangs
        self.guard.daemon = True

    def start(self):
        self.thread.start()
        self.guard.start()

    def stop(self):
        self.guard.cancel()
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def sample_times(self) -> list[str]:
        return [s["time"] for r in self.requests for s in r["payload"]["samples"]]


@pytest.fixture
def server():
    srv = IngestServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def payload(time="2026-05-09T07:35:20+00:00"):
    return {"node": "n1", "agent": "nvml", "samples": [{"time": time, "index": 0}], "errors": []}


def test_send_posts_json_with_bearer_token_to_the_ingest_path(server):
    result = agent.send(server.url + "/", "tok-123", payload(), timeout=5)
    assert (result.status, json.loads(result.body)) == (202, {"accepted": 1})
    (request,) = server.requests
    assert request["path"] == "/api/v1/telemetry/ingest"
    assert request["headers"]["Authorization"] == "Bearer tok-123"
    assert request["headers"]["Content-Type"] == "application/json"
    assert request["payload"] == payload()
    assert agent.ingest_url("https://x/api/v1/telemetry/ingest") == "https://x/api/v1/telemetry/ingest"


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(202, "ok"), (200, "ok"), (401, "auth"), (403, "auth"), (400, "rejected"), (500, "transient"), (503, "transient")],
)
def test_send_and_classify_statuses(server, status, outcome):
    server.script = [(status, '{"detail": "x"}')]
    result = agent.send(server.url, "tok", payload(), timeout=5)
    assert result.status == status and agent.classify(result.status) == outcome
    assert result.body == '{"detail": "x"}'


def test_send_connection_refused_and_timeout_are_transient(server):
    refused = agent.send(f"http://127.0.0.1:{free_port()}", "tok", payload(), timeout=2)
    assert refused.status is None and agent.classify(None) == "transient" and "cannot reach" in refused.body
    server.delay = 1.0
    slow = agent.send(server.url, "tok", payload(), timeout=0.2)
    assert slow.status is None and agent.classify(slow.status) == "transient"


class Token:
    def __init__(self, token="tok"):
        self.token = token
        self.reloads = 0
        self.path = "/etc/gpupool-agent/token"

    def reload(self):
        self.reloads += 1


def make_shipper(url, batcher, **kw):
    clock = kw.pop("clock", lambda: 0.0)
    return agent.Shipper(url, kw.pop("token", Token()), "n1", batcher, timeout=5, rand=lambda: 0.5, clock=clock, **kw)


def round_at(second: int) -> dict:
    when = f"2026-05-09T07:35:{second:02d}+00:00"
    return {"samples": [{"time": when, "index": 0}], "errors": []}


def test_outage_then_resend_oldest_first_several_per_post(server, caplog):
    batcher = agent.Batcher(max_rounds=360, per_post=3)
    shipper = make_shipper(server.url, batcher)
    server.script = [(503, "down")] * 4
    delays = []
    for second in range(4):
        batcher.add(round_at(second))
        assert shipper.flush(now=100.0) == "transient"
        delays.append(shipper.next_attempt - 100.0)
    assert delays == [5.0, 10.0, 20.0, 40.0] and len(batcher) == 4
    assert not shipper.due(100.0 + 39) and shipper.due(100.0 + 40)
    batcher.add(round_at(4))
    with caplog.at_level(logging.WARNING, logger="gpupool_agent"):
        assert shipper.flush(now=140.0) == "ok"
    assert len(batcher) == 0 and shipper.failures == 0 and shipper.sent_total == 5
    delivered = server.requests[4:]
    assert [len(r["payload"]["samples"]) for r in delivered] == [3, 2]  # several rounds per POST
    delivered_times = [s["time"] for r in delivered for s in r["payload"]["samples"]]
    assert delivered_times == [f"2026-05-09T07:35:{s:02d}+00:00" for s in range(5)]  # oldest first
    assert "server accepts again" in caplog.text


def test_backoff_is_capped():
    shipper = make_shipper("http://x", agent.Batcher(), backoff_max=60.0)
    assert [shipper._backoff() for _ in range(8)] == [5.0, 10.0, 20.0, 40.0, 60.0, 60.0, 60.0, 60.0]
    jittery = agent.Shipper("http://x", Token(), "n1", agent.Batcher(), rand=lambda: 0.0)
    assert jittery._backoff() == 3.75


def test_full_buffer_drops_oldest_and_counts(server, caplog):
    batcher = agent.Batcher(max_rounds=3, per_post=30)
    shipper = make_shipper(f"http://127.0.0.1:{free_port()}", batcher)
    for second in range(5):
        batcher.add(round_at(second))
        shipper.flush(now=float(second * 100))
    assert batcher.dropped_since_success == 2
    shipper.url = server.url
    with caplog.at_level(logging.WARNING, logger="gpupool_agent"):
        assert shipper.flush(now=1000.0) == "ok"
    assert server.sample_times() == [f"2026-05-09T07:35:{s:02d}+00:00" for s in (2, 3, 4)]
    assert batcher.dropped_total == 2 and batcher.dropped_since_success == 0
    assert "2 dropped from the full buffer" in caplog.text


def test_bad_token_keeps_the_rounds_and_retries_slowly(server, caplog):
    batcher = agent.Batcher()
    token = Token()
    shipper = make_shipper(server.url, batcher, token=token, auth_retry=300.0)
    server.script = [(401, '{"detail": "invalid token"}')]
    batcher.add(round_at(0))
    with caplog.at_level(logging.ERROR, logger="gpupool_agent"):
        assert shipper.flush(now=10.0) == "auth"
    assert len(batcher) == 1 and token.reloads == 1
    assert shipper.next_attempt == 310.0 and not shipper.due(309.0)
    assert "refused the token (HTTP 401)" in caplog.text and "invalid token" in caplog.text
    assert shipper.flush(now=310.0) == "ok" and len(batcher) == 0


def test_bad_request_drops_only_the_bad_round_and_logs_the_body(server, caplog):
    batcher = agent.Batcher(per_post=30)
    shipper = make_shipper(server.url, batcher)
    for second in range(3):
        batcher.add(round_at(second))
    # the merged POST is refused, then the rounds go one by one; the second one is the bad one
    server.script = [(400, '{"samples": ["bad"]}'), (202, None), (400, '{"samples": ["bad time"]}'), (202, None)]
    with caplog.at_level(logging.ERROR, logger="gpupool_agent"):
        assert shipper.flush(now=0.0) == "ok"
    assert len(batcher) == 0 and shipper.rejected_total == 1 and shipper.sent_total == 2
    assert [len(r["payload"]["samples"]) for r in server.requests] == [3, 1, 1, 1]
    assert "bad time" in caplog.text


def test_flush_stops_at_the_deadline(server):
    batcher = agent.Batcher(per_post=1)
    ticks = iter([0.0, 0.5, 2.0, 3.0])
    shipper = make_shipper(server.url, batcher, clock=lambda: next(ticks))
    for second in range(3):
        batcher.add(round_at(second))
    shipper.flush(now=0.0, deadline=1.0)
    assert len(server.requests) == 2 and len(batcher) == 1


def test_agent_loop_samples_through_an_outage_and_catches_up(server):
    batcher = agent.Batcher(max_rounds=360, per_post=30)
    shipper = make_shipper(server.url, batcher)
    loop = agent.Agent(FakeNvml(fail={(3, "util"): pynvml.NVML_ERROR_GPU_IS_LOST}), shipper, interval=10.0)
    server.script = [(503, "down"), (503, "down")]
    now = 1000.0
    wakes = []
    for _ in range(4):  # 1000 sample+fail (retry 1005), 1010 sample+fail (retry 1020), 1020 ok, 1030 ok
        wakes.append(loop.tick(now))
        now += 10.0
    assert wakes[:2] == [1005.0, 1020.0]
    assert len(batcher) == 0 and shipper.sent_total == 4
    last = server.requests[2]["payload"]
    assert len(last["samples"]) == 9 and len(last["errors"]) == 3  # 3 rounds of 3 good GPUs + 1 lost
    assert last["errors"][0]["message"] == "nvmlDeviceGetUtilizationRates: GPU is lost"


def test_agent_loop_reports_a_node_without_nvml(server, caplog):
    shipper = make_shipper(server.url, agent.Batcher())
    loop = agent.Agent(FakeNvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND), shipper, interval=10.0)
    with caplog.at_level(logging.ERROR, logger="gpupool_agent"):
        loop.tick(0.0)
        loop.tick(10.0)
    assert caplog.text.count("NVML not available") == 1  # logged on the change, not every round
    errors = [e for r in server.requests for e in r["payload"]["errors"]]
    assert len(errors) == 2 and errors[0]["index"] is None


# ----------------------------------------------------------------------------------------------- main()


def test_dry_run_once_prints_the_batch(capsys):
    out = io.StringIO()
    nvml = FakeNvml(fail={(3, "util"): pynvml.NVML_ERROR_GPU_IS_LOST})
    rc = agent.main(["--dry-run", "--once", "--node", "gpu-a100-01"], nvml=nvml, stdout=out)
    assert rc == 0
    batch = json.loads(out.getvalue())
    assert batch["node"] == "gpu-a100-01" and batch["agent"] == "nvml"
    assert [s["index"] for s in batch["samples"]] == [0, 1, 2]
    assert batch["errors"][0]["index"] == 3
    assert set(batch["samples"][0]) == {
        "time",
        "index",
        "uuid",
        "compute_util",
        "memory_util",
        "memory_used_mb",
        "memory_total_mb",
        "temperature_c",
        "power_w",
    }
    assert datetime.fromisoformat(batch["samples"][0]["time"]).tzinfo is not None


def test_once_sends_and_reports_the_outcome(server, tmp_path):
    token = write_token(tmp_path, "tok-once\n")
    args = ["--url", server.url, "--token-file", str(token), "--node", "n1", "--once", "--timeout", "5"]
    assert agent.main(args, nvml=FakeNvml()) == 0
    request = server.requests[0]
    assert request["headers"]["Authorization"] == "Bearer tok-once"
    assert request["payload"]["node"] == "n1" and len(request["payload"]["samples"]) == 4
    server.script = [(500, "boom")]
    assert agent.main(args, nvml=FakeNvml()) == 1


# ------------------------------------------------------------------------------------------- standalone


def test_agent_is_standalone_stdlib_and_pynvml_and_python39_syntax():
    source = AGENT_FILE.read_text()
    tree = ast.parse(source, feature_version=(3, 9))
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            modules.add((node.module or "").split(".")[0])
    assert modules - sys.stdlib_module_names == {"pynvml"}
    assert "import django" not in source and "requests" not in modules


def test_agent_script_runs_for_real_without_a_traceback():
    """The real script, real pynvml: on this GPU-less machine a clear error and exit 1; on a GPU node, exit 0."""
    result = subprocess.run(
        [sys.executable, str(AGENT_FILE), "--dry-run", "--once", "--node", "ci"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd="/",
    )
    assert "Traceback" not in result.stderr
    batch = json.loads(result.stdout)
    assert batch["node"] == "ci"
    if result.returncode == 1:
        assert "NVML not available" in result.stderr
        assert batch["samples"] == [] and batch["errors"][0]["index"] is None
    else:
        assert result.returncode == 0 and (batch["samples"] or batch["errors"])
