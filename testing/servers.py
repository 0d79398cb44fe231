"""A real ASGI server (gpupool/serve.py: HTTP and WebSocket) on the test database, for browser tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from django.db import connection

BASE_DIR = Path(__file__).resolve().parent.parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _database_url() -> str:
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user = quote(db.get("USER") or "")
    password = quote(db.get("PASSWORD") or "")
    return f"postgres://{user}:{password}@{db.get('HOST') or '127.0.0.1'}:{db.get('PORT') or 5432}/{db['NAME']}"


def _wait_listening(process, port: int, log_name: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode}; see {log_name}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"server did not listen on {port} within 30 s; see {log_name}")


def _stop(processes) -> None:
    for process in processes:
        if process.poll() is None:
            process.terminate()
    for process in processes:
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


@contextmanager
def portal_stack(*, worker: bool = False, beat: bool = False, extra_env: dict | None = None, port: int | None = None):
    """The web process (gpupool/serve.py: HTTP + WebSocket), and optionally a Celery worker and
    beat, all on the test database and the test Redis: the portal as `make dev` runs it. Yields
    the base URL. `port`: a fixed one (the dev cluster's job events go to the dev portal's port)."""
    with portal_processes(worker=worker, beat=beat, extra_env=extra_env, port=port) as (base_url, _web_pid):
        yield base_url


@contextmanager
def portal_processes(*, worker=False, beat=False, extra_env: dict | None = None, port: int | None = None):
    """`portal_stack`, yielding (base URL, the web process's pid): for what measures the process."""
    port = port or free_port()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "DEBUG": "1",
        "PYTHONUNBUFFERED": "1",
        **(extra_env or {}),
    }
    log_dir = BASE_DIR / "var" / "test-logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    commands = {"web": [sys.executable, "-m", "gpupool.serve", "--host", "127.0.0.1", "--port", str(port)]}
    celery = [sys.executable, "-m", "celery", "-A", "gpupool"]
    if worker:
        commands["worker"] = [
            *celery,
            "worker",
            "--concurrency=2",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
        ]
    if beat:
        commands["beat"] = [*celery, "beat", "--loglevel=INFO", "--schedule", str(log_dir / f"beat-{port}.db")]
    processes, logs = [], []
    try:
        for name, command in commands.items():
            log = open(log_dir / f"{name}-{port}.log", "w")  # noqa: SIM115
            logs.append(log)
            processes.append(subprocess.Popen(command, cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT))
        _wait_listening(processes[0], port, logs[0].name)
        yield f"http://127.0.0.1:{port}", processes[0].pid
    finally:
        _stop(processes)
        for log in logs:
            log.close()


def daphne_server():
    return portal_stack()


CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
CHROMIUM_PATH = os.environ.get("CHROMIUM_PATH", "/usr/bin/chromium")


PROMETHEUS_PATH = os.environ.get("PROMETHEUS_PATH", "/usr/bin/prometheus")


@contextmanager
def prometheus_server(config: str):
    """A real Prometheus (Debian's package) with this prometheus.yml, on a free port, its data in a
    throwaway folder. Yields its base URL once it says it is ready."""
    import tempfile
    import urllib.request

    if not Path(PROMETHEUS_PATH).exists():
        raise RuntimeError(f"no Prometheus at {PROMETHEUS_PATH} (scripts/install-system-deps.sh installs it)")
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="gpupool-prometheus-") as folder:
        (Path(folder) / "prometheus.yml").write_text(config)
        log_path = Path(folder) / "prometheus.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                [
                    PROMETHEUS_PATH,
                    f"--config.file={folder}/prometheus.yml",
                    f"--storage.tsdb.path={folder}/data",
                    f"--web.listen-address=127.0.0.1:{port}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            try:
                url = f"http://127.0.0.1:{port}"
                deadline = time.monotonic() + 60
                while True:
                    try:
                        with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as answer:
                            if answer.status == 200:
                                break
                    except OSError:
                        pass
                    if process.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"Prometheus did not start: {log_path.read_text()[-2000:]}")
                    time.sleep(0.2)
                yield url
            finally:
                _stop([process])
