"""The real Slurm-web 6.0 agent (rackslab/Slurm-web), run against a dev cluster for a benchmark.

    from peer.slurmweb_agent import running_agent      # with bench/ on sys.path
    with running_agent("26.05") as (jobs_url, headers):
        urllib.request.urlopen(urllib.request.Request(jobs_url, headers=headers))

Standard library only: importable from the project's .venv. The agent itself runs in its
own venv, $SLURMWEB_PEER_DIR/venv (bench/peer/setup.sh builds it), through bench/peer/agent_launcher.py
(stock `slurm-web` entry point, Redis database chosen). Each use writes a fresh config,
JWT signing key and log under $SLURMWEB_PEER_DIR/run/, starts the agent on a free 127.0.0.1 port,
waits until its /ping has discovered slurmrestd, yields, and stops the agent (SIGTERM to
the one PID it started, then SIGKILL). The run directory is removed, the log kept in
$SLURMWEB_PEER_DIR/logs/.

Agent config: slurmrestd over TCP with JWT in `auto` mode (the agent signs its own
tokens for user `slurm` with the cluster's HS256 key, as the portal does), REST version
discovered from Slurm-web's default list (0.0.44, 0.0.43, 0.0.42, 0.0.41: 0.0.44 on 26.05,
0.0.42 on 24.11), Redis cache on (default TTLs: jobs 30 s), RacksDB and metrics off, the
vendor RBAC policy. The yielded headers carry a bearer token signed with the run's key
(audience `slurm-web`, a regular user: the vendor `user` role may view jobs).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

PEER_DIR = Path(os.environ.get("SLURMWEB_PEER_DIR", Path(__file__).resolve().parent / ".work"))
VENV_PYTHON = PEER_DIR / "venv" / "bin" / "python"
SRC_DIR = PEER_DIR / "src"
LAUNCHER = Path(__file__).resolve().parent / "agent_launcher.py"
SLURMWEB_VERSION = "6.0.0"
REDIS_DB = 12

# Same table as gpupool/settings.py DEVCLUSTER_RELEASES: state directory, slurmrestd URL.
RELEASES = {
    "24.11": (Path("/var/lib/gpupool/devcluster"), "http://127.0.0.1:16820"),
    "26.05": (Path("/var/lib/gpupool/devcluster-26.05"), "http://127.0.0.1:17820"),
}


class PeerAgentError(RuntimeError):
    """The Slurm-web agent cannot be set up or did not come up."""


class AgentHandle(tuple):
    """(jobs_url, headers), plus what the agent reported at start-up."""

    def __new__(cls, jobs_url, headers, **info):
        handle = super().__new__(cls, (jobs_url, headers))
        handle.__dict__.update(info)  # base_url, pid, log_path, slurm_version, api_version
        return handle

    jobs_url = property(lambda self: self[0])
    headers = property(lambda self: self[1])


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _bearer_token(key: bytes, user: str, lifetime: int) -> str:
    """An HS256 JWT the agent accepts (rfl.authentication JWTManager: aud, sub, groups)."""
    now = int(time.time())
    header = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}, separators=(",", ":")).encode())
    payload = _b64(
        json.dumps(
            {"iat": now, "exp": now + lifetime, "aud": "slurm-web", "sub": user, "groups": []},
            separators=(",", ":"),
        ).encode()
    )
    signature = hmac.new(key, f"{header}.{payload}".encode(), hashlib.sha256).digest()
    return f"{header}.{payload}.{_b64(signature)}"


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _config(*, port, rest_url, rest_key, run_dir, redis_host, redis_port) -> str:
    return f"""\
[service]
cluster=gpupool
interface=127.0.0.1
port={port}

[slurmrestd]
uri={rest_url}
auth=jwt
jwt_mode=auto
jwt_user=slurm
jwt_key={rest_key}

[policy]
definition={SRC_DIR}/conf/vendor/policy.yml
vendor_roles={SRC_DIR}/conf/vendor/policy.ini
roles={run_dir}/no-site-policy.ini

[jwt]
key={run_dir}/jwt.key

[racksdb]
enabled=no

[cache]
enabled=yes
host={redis_host}
port={redis_port}

[metrics]
enabled=no
"""


def _tail(path: Path, lines: int = 25) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def _check_setup(release: str) -> tuple[Path, str]:
    if release not in RELEASES:
        raise PeerAgentError(f"unknown release {release!r}: one of {', '.join(RELEASES)}")
    if not VENV_PYTHON.exists():
        raise PeerAgentError(f"Slurm-web venv missing: {VENV_PYTHON} not found; run bench/peer/setup.sh first")
    for needed in (SRC_DIR / "conf/vendor/agent.yml", SRC_DIR / "conf/vendor/policy.yml", LAUNCHER):
        if not needed.exists():
            raise PeerAgentError(f"{needed} not found; run bench/peer/setup.sh first")
    state_dir, rest_url = RELEASES[release]
    rest_key = state_dir / "root/etc/slurm/jwt_hs256.key"
    if not os.access(rest_key, os.R_OK):
        raise PeerAgentError(f"cannot read the cluster's JWT key {rest_key} (run as root)")
    return rest_key, rest_url


@contextmanager
def running_agent(
    release: str = "26.05",
    *,
    redis_db: int = REDIS_DB,
    redis_host: str = "127.0.0.1",
    redis_port: int = 6379,
    user: str = "bench",
    fresh_cache: bool = True,
    startup_timeout: float = 60.0,
):
    """Run a Slurm-web agent on the `release` dev cluster; yield (jobs_url, headers).

    jobs_url is http://127.0.0.1:PORT/v6.0.0/jobs; headers hold `Authorization: Bearer ...`.
    The yielded value is an AgentHandle: it unpacks as that pair and also has base_url,
    pid, log_path, slurm_version and api_version (from the agent's /ping).
    fresh_cache: delete Slurm-web's own keys (jobs, nodes, job-*, ..., hit/miss counters)
    from the Redis database before the start and after the stop, so the first jobs request
    is a miss (the keys carry no prefix and outlive the agent). Other keys are left alone.
    """
    rest_key, rest_url = _check_setup(release)
    (PEER_DIR / "run").mkdir(parents=True, exist_ok=True)
    (PEER_DIR / "logs").mkdir(parents=True, exist_ok=True)
    run_dir = Path(tempfile.mkdtemp(prefix=f"agent-{release}-", dir=PEER_DIR / "run"))
    log_path = PEER_DIR / "logs" / f"{run_dir.name}.log"
    proc = None
    try:
        key = secrets.token_bytes(32)
        key_path = run_dir / "jwt.key"
        key_path.write_bytes(key)
        key_path.chmod(0o600)
        port = _free_port()
        conf = run_dir / "agent.ini"
        conf.write_text(
            _config(
                port=port,
                rest_url=rest_url,
                rest_key=rest_key,
                run_dir=run_dir,
                redis_host=redis_host,
                redis_port=redis_port,
            )
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PYTHON"))}
        env["SLURMWEB_REDIS_DB"] = str(redis_db)
        env["SLURMWEB_REDIS_HOST"] = redis_host
        env["SLURMWEB_REDIS_PORT"] = str(redis_port)
        env["SLURMWEB_FRESH_CACHE"] = "1" if fresh_cache else "0"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                [
                    str(VENV_PYTHON),
                    str(LAUNCHER),
                    "agent",
                    "--conf-defs",
                    str(SRC_DIR / "conf/vendor/agent.yml"),
                    "--conf",
                    str(conf),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=run_dir,
                start_new_session=True,
            )
        base_url = f"http://127.0.0.1:{port}"
        ping = _wait_ready(proc, f"{base_url}/v{SLURMWEB_VERSION}/ping", startup_timeout, log_path)
        headers = {"Authorization": f"Bearer {_bearer_token(key, user, 24 * 3600)}"}
        yield AgentHandle(
            f"{base_url}/v{SLURMWEB_VERSION}/jobs",
            headers,
            base_url=base_url,
            pid=proc.pid,
            log_path=log_path,
            slurm_version=ping["versions"]["slurm"],
            api_version=ping["versions"]["api"],
        )
    finally:
        if proc is not None:
            _stop(proc)
            if fresh_cache:
                subprocess.run(
                    [str(VENV_PYTHON), str(LAUNCHER), "cleanup"],
                    env=env,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                    timeout=30,
                    check=False,
                )
        shutil.rmtree(run_dir, ignore_errors=True)


def _wait_ready(proc, ping_url: str, timeout: float, log_path: Path) -> dict:
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise PeerAgentError(
                f"Slurm-web agent exited with {proc.returncode} at start-up; log {log_path}:\n" + _tail(log_path)
            )
        try:
            with urllib.request.urlopen(ping_url, timeout=5) as response:
                return json.load(response)
        except urllib.error.HTTPError as err:
            last = f"HTTP {err.code}: {err.read()[:300].decode(errors='replace')}"
        except (urllib.error.URLError, OSError) as err:
            last = str(err)
        time.sleep(0.2)
    raise PeerAgentError(
        f"Slurm-web agent not ready after {timeout:.0f} s ({last}); log {log_path}:\n" + _tail(log_path)
    )


def _stop(proc) -> None:
    if proc.poll() is not None:
        return
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=10)
