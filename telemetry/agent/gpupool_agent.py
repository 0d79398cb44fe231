#!/usr/bin/env python3
"""gpupool node agent: reads every GPU of this node through NVML and POSTs the samples to the portal.

Standalone on purpose: Python 3.9+ standard library plus ``pynvml`` (``pip install nvidia-ml-py``), no
Django, no requests. The file is copied onto each GPU node and run by systemd (see README.md next to it).

Every ``--interval`` seconds (default 10) it reads, per GPU: index, UUID, utilisation (``.gpu`` ->
compute_util, ``.memory`` -> memory_util, percent), memory used/total (bytes -> MiB, like nvidia-smi),
temperature (C) and power (mW -> W). A GPU whose query raises NVMLError ("GPU is lost" after an Xid 79, ...)
becomes an ``errors`` entry of the batch instead of stopping the agent.

Request contract (the portal's ingest endpoint must match it)::

    POST <url>/api/v1/telemetry/ingest
    Authorization: Bearer <token>
    Content-Type: application/json
    {"node": "gpu-a100-01", "agent": "nvml", "driver_version": "550.54.15",
     "samples": [{"time": "2026-05-09T07:35:20+00:00", "index": 0, "uuid": "GPU-...", "compute_util": 87.0,
                  "memory_util": 40.0, "memory_used_mb": 30000, "memory_total_mb": 40960,
                  "temperature_c": 65.0, "power_w": 250.5}, ...],
     "errors": [{"time": "2026-05-09T07:35:20+00:00", "index": 3, "message": "nvmlDeviceGetUtilizationRates:
                 GPU is lost"}]}

One POST can carry several sampling rounds (after an outage), so every sample and error has its own time.
``index`` of an error is null when the whole node failed (NVML not available). Answers: 2xx (202
``{"accepted": n}``) = stored; 401/403 = bad token: logged, retried every ``--auth-retry`` seconds with the
token file re-read; 400/413/422 = the batch is wrong: its body is logged and the batch dropped (a merged POST
is first split to find the bad round); anything else (5xx, 404, 429, connection errors, timeouts) =
transient: the batches stay in a bounded in-memory buffer (``--buffer`` rounds, 1 h at 10 s) and are resent
oldest-first, up to ``--per-post`` rounds per POST, with capped exponential backoff.
"""

from __future__ import annotations

import argparse
import collections
import http.client
import json
import logging
import os
import random
import signal
import socket
import stat
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone

AGENT = "nvml"
VERSION = "1.0"
INGEST_PATH = "/api/v1/telemetry/ingest"
MIB = 1024 * 1024
MAX_LOGGED_BODY = 2000

log = logging.getLogger("gpupool_agent")


class ConfigError(Exception):
    """Bad command line or token file: the agent refuses to start."""


class NvmlUnavailable(RuntimeError):
    """NVML cannot be used at all on this machine (no driver, library missing, driver not loaded)."""


# --------------------------------------------------------------------------------------------------- NVML


def utc_now() -> datetime:
    return datetime.now(timezone.utc)  # noqa: UP017 -- datetime.UTC is 3.11+, the agent runs on 3.9


def iso(when: datetime) -> str:
    return when.astimezone(timezone.utc).isoformat(timespec="seconds")  # noqa: UP017


def _nvml_message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # pynvml's __str__ itself calls into NVML for unknown codes
        text = ""
    return text or repr(exc)


class _GpuQueryFailed(Exception):
    pass


def _query(nvml, name: str, *args):
    try:
        return getattr(nvml, name)(*args)
    except nvml.NVMLError as exc:
        raise _GpuQueryFailed(f"{name}: {_nvml_message(exc)}") from exc


def _device_count(nvml) -> int:
    try:
        return nvml.nvmlDeviceGetCount()
    except nvml.NVMLError:
        pass  # first call (not initialised yet) or the driver was reloaded: (re)initialise once
    try:
        nvml.nvmlInit()
        return nvml.nvmlDeviceGetCount()
    except nvml.NVMLError as exc:
        raise NvmlUnavailable(
            f"NVML not available: {_nvml_message(exc)} "
            "(is the NVIDIA driver installed and loaded on this node? check that `nvidia-smi` works)"
        ) from exc


def _text(value) -> str:
    return value.decode("ascii", "replace") if isinstance(value, bytes) else str(value)


def read_gpus(nvml, now: datetime | None = None) -> tuple[list[dict], list[dict]]:
    """Read every GPU once. ``nvml`` is the pynvml module or an object with the same functions.

    Returns ``(samples, errors)`` as JSON-ready dicts. A GPU whose query raises NVMLError becomes an
    errors entry (``{"time", "index", "message"}``); the other GPUs are still reported. Raises
    NvmlUnavailable when NVML itself cannot be initialised (no driver on this machine).
    """
    when = iso(now or utc_now())
    count = _device_count(nvml)
    samples: list[dict] = []
    errors: list[dict] = []
    for index in range(count):
        try:
            handle = _query(nvml, "nvmlDeviceGetHandleByIndex", index)
            uuid = _text(_query(nvml, "nvmlDeviceGetUUID", handle))
            util = _query(nvml, "nvmlDeviceGetUtilizationRates", handle)
            memory = _query(nvml, "nvmlDeviceGetMemoryInfo", handle)
            temperature = _query(nvml, "nvmlDeviceGetTemperature", handle, nvml.NVML_TEMPERATURE_GPU)
            power_mw = _query(nvml, "nvmlDeviceGetPowerUsage", handle)
        except _GpuQueryFailed as exc:
            errors.append({"time": when, "index": index, "message": str(exc)})
            continue
        samples.append(
            {
                "time": when,
                "index": index,
                "uuid": uuid,
                "compute_util": float(util.gpu),
                "memory_util": float(util.memory),
                "memory_used_mb": int(memory.used) // MIB,
                "memory_total_mb": int(memory.total) // MIB,
                "temperature_c": float(temperature),
                "power_w": round(power_mw / 1000.0, 3),
            }
        )
    return samples, errors


def read_driver_version(nvml) -> str:
    """The loaded NVIDIA driver ("550.54.15"), which the portal compares with each image's
    minimum; "" when NVML cannot say (the batch is sent without it)."""
    try:
        return _text(nvml.nvmlSystemGetDriverVersion())
    except nvml.NVMLError:
        return ""


def sample_round(nvml, now: datetime | None = None) -> dict:
    """One sampling round as a buffer entry; NVML being unavailable becomes a node-level error (index null)."""
    now = now or utc_now()
    try:
        samples, errors = read_gpus(nvml, now)
    except NvmlUnavailable as exc:
        return {"samples": [], "errors": [{"time": iso(now), "index": None, "message": str(exc)}], "driver": ""}
    return {"samples": samples, "errors": errors, "driver": read_driver_version(nvml)}


def build_payload(node: str, rounds: list[dict]) -> dict:
    """The POST body for one or more sampling rounds (oldest first); the newest round's driver."""
    payload: dict = {"node": node, "agent": AGENT, "samples": [], "errors": []}
    for entry in rounds:
        payload["samples"].extend(entry["samples"])
        payload["errors"].extend(entry["errors"])
        if entry.get("driver"):
            payload["driver_version"] = entry["driver"]
    return payload


# ------------------------------------------------------------------------------------------------ buffer


class Batcher:
    """Bounded FIFO of sampling rounds not yet accepted by the server.

    ``add`` drops the oldest round beyond ``max_rounds`` (counted in ``dropped_total`` and
    ``dropped_since_success``); ``peek`` returns the oldest rounds for the next POST; ``discard`` removes
    them once the server answered.
    """

    def __init__(self, max_rounds: int = 360, per_post: int = 30):
        if max_rounds < 1 or per_post < 1:
            raise ValueError("max_rounds and per_post must be at least 1")
        self.max_rounds = max_rounds
        self.per_post = per_post
        self._pending: collections.deque[dict] = collections.deque()
        self.dropped_total = 0
        self.dropped_since_success = 0

    def __len__(self) -> int:
        return len(self._pending)

    def add(self, entry: dict) -> bool:
        """Queue a round; returns True when the oldest round had to be dropped to make room."""
        dropped = False
        if len(self._pending) >= self.max_rounds:
            self._pending.popleft()
            self.dropped_total += 1
            self.dropped_since_success += 1
            dropped = True
        self._pending.append(entry)
        return dropped

    def peek(self, n: int | None = None) -> list[dict]:
        n = self.per_post if n is None else n
        return [self._pending[i] for i in range(min(n, len(self._pending)))]

    def discard(self, n: int) -> None:
        for _ in range(min(n, len(self._pending))):
            self._pending.popleft()


# -------------------------------------------------------------------------------------------------- HTTP


class SendResult:
    """``status`` is the HTTP status, or None when no answer came (connection refused, timeout, DNS)."""

    __slots__ = ("status", "body")

    def __init__(self, status: int | None, body: str):
        self.status = status
        self.body = body

    def __repr__(self) -> str:
        return f"SendResult({self.status!r}, {self.body[:80]!r})"


def ingest_url(base: str) -> str:
    base = base.rstrip("/")
    return base if base.endswith(INGEST_PATH) else base + INGEST_PATH


def _read_body(response) -> str:
    try:
        return response.read(MAX_LOGGED_BODY * 4).decode("utf-8", "replace")
    except Exception:
        return ""


_default_opener = urllib.request.build_opener()


def send(url: str, token: str, payload: dict, opener=None, timeout: float = 10.0) -> SendResult:
    """POST ``payload`` as JSON to ``<url>/api/v1/telemetry/ingest``. Never raises for network trouble.

    ``opener`` is anything with ``open(request, timeout=...)`` (an ``urllib.request.OpenerDirector`` by
    default); tests inject fakes.
    """
    data = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    request = urllib.request.Request(
        ingest_url(url),
        data=data,
        method="POST",
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"gpupool-agent/{VERSION}",
        },
    )
    opener = opener or _default_opener
    try:
        with opener.open(request, timeout=timeout) as response:
            return SendResult(response.status, _read_body(response))
    except urllib.error.HTTPError as exc:
        return SendResult(exc.code, _read_body(exc))
    except urllib.error.URLError as exc:  # refused, DNS, TLS
        return SendResult(None, f"cannot reach {ingest_url(url)}: {exc.reason}")
    except (OSError, http.client.HTTPException) as exc:  # timeouts, resets, garbled answers
        return SendResult(None, f"no valid answer from {ingest_url(url)}: {exc!r}")


OK, AUTH, REJECTED, TRANSIENT = "ok", "auth", "rejected", "transient"


def classify(status: int | None) -> str:
    if status is not None and 200 <= status < 300:
        return OK
    if status in (401, 403):
        return AUTH
    if status in (400, 413, 422):
        return REJECTED
    return TRANSIENT


# ------------------------------------------------------------------------------------------------- token


def read_token(path: str) -> str:
    """Read the bearer token; refuse a file that group or others can access (chmod 600)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # never hang on a FIFO
    except FileNotFoundError:
        raise ConfigError(f"token file {path} does not exist") from None
    except OSError as exc:
        raise ConfigError(f"cannot open token file {path}: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise ConfigError(f"token file {path} is not a regular file")
        if mode & 0o077:
            raise ConfigError(
                f"token file {path} has mode {stat.S_IMODE(mode):04o}: it must not be readable or writable by "
                f"group or others; fix it with: chmod 600 {path}"
            )
        text = os.read(fd, 4096).decode("utf-8")
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read token file {path}: {exc}") from None
    finally:
        os.close(fd)
    parts = text.split()
    if len(parts) != 1:
        raise ConfigError(f"token file {path} must hold exactly one token (found {len(parts)} words)")
    if not all(33 <= ord(ch) < 127 for ch in parts[0]):
        raise ConfigError(f"token file {path} holds characters that cannot go into an HTTP header")
    return parts[0]


class TokenFile:
    def __init__(self, path: str):
        self.path = path
        self.token = read_token(path)

    def reload(self) -> None:
        """Re-read after a 401/403 so a rotated token is picked up without a restart."""
        try:
            self.token = read_token(self.path)
        except ConfigError as exc:
            log.error("%s (keeping the previous token)", exc)


# ------------------------------------------------------------------------------------------------ sender


class Shipper:
    """Sends buffered rounds oldest-first, several per POST, with capped exponential backoff."""

    def __init__(
        self,
        url: str,
        token,  # a TokenFile, or anything with .token and .reload()
        node: str,
        batcher: Batcher,
        opener=None,
        timeout: float = 10.0,
        backoff_base: float = 5.0,
        backoff_max: float = 60.0,
        auth_retry: float = 300.0,
        rand=random.random,
        clock=time.monotonic,
    ):
        self.url = url
        self.token = token
        self.node = node
        self.batcher = batcher
        self.opener = opener
        self.timeout = timeout
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self.auth_retry = auth_retry
        self.rand = rand
        self.clock = clock
        self.next_attempt = 0.0  # monotonic seconds
        self.failures = 0  # consecutive transient failures (drives the backoff)
        self.in_outage = False  # the last POST was not accepted (transient or auth)
        self.rejected_total = 0
        self.sent_total = 0
        self._singles = 0  # rounds still to send one per POST (finding the bad one after a 400)

    def due(self, now: float) -> bool:
        return len(self.batcher) > 0 and now >= self.next_attempt

    def _backoff(self) -> float:
        self.failures += 1
        delay = self.backoff_base * 2 ** min(self.failures - 1, 20)
        return min(self.backoff_max, delay * (0.75 + 0.5 * self.rand()))

    def flush(self, now: float, deadline: float | None = None) -> str | None:
        """Send until the buffer is empty, the server fails or ``deadline`` (monotonic) passes.

        Returns the last outcome (ok/auth/rejected/transient), None when nothing was sent.
        """
        outcome = None
        while len(self.batcher) and (deadline is None or self.clock() < deadline):
            group = self.batcher.peek(1 if self._singles else None)
            result = send(self.url, self.token.token, build_payload(self.node, group), self.opener, self.timeout)
            outcome = classify(result.status)
            if outcome == OK:
                self.batcher.discard(len(group))
                self._singles = max(0, self._singles - len(group))
                self.sent_total += len(group)
                if self.in_outage:
                    log.warning(
                        "server accepts again; %d round(s) still buffered, %d dropped from the full buffer "
                        "during the outage",
                        len(self.batcher),
                        self.batcher.dropped_since_success,
                    )
                self.failures = 0
                self.in_outage = False
                self.batcher.dropped_since_success = 0
                continue
            if outcome == REJECTED:
                if len(group) > 1:
                    log.warning(
                        "server rejected a POST of %d rounds (HTTP %s); resending them one by one",
                        len(group),
                        result.status,
                    )
                    self._singles = len(group)
                    continue
                self.batcher.discard(1)
                self._singles = max(0, self._singles - 1)
                self.rejected_total += 1
                log.error(
                    "server rejected a round (HTTP %s), dropping it (a bug in the agent or the server): %s",
                    result.status,
                    result.body[:MAX_LOGGED_BODY],
                )
                continue
            self.in_outage = True
            if outcome == AUTH:
                self.next_attempt = now + self.auth_retry
                log.error(
                    "server refused the token (HTTP %s) from %s: %s; retrying in %.0f s, %d round(s) buffered",
                    result.status,
                    getattr(self.token, "path", "the token file"),
                    result.body[:200],
                    self.auth_retry,
                    len(self.batcher),
                )
                self.token.reload()
                break
            delay = self._backoff()
            self.next_attempt = now + delay
            what = f"HTTP {result.status}: {result.body[:200]}" if result.status else result.body
            log.warning("sending failed (%s); retrying in %.0f s, %d round(s) buffered", what, delay, len(self.batcher))
            break
        return outcome


# --------------------------------------------------------------------------------------------------- agent


class Agent:
    """The loop body, separated from the clock so tests can drive it."""

    def __init__(self, nvml, shipper: Shipper, interval: float = 10.0):
        self.nvml = nvml
        self.shipper = shipper
        self.interval = interval
        self.next_sample = 0.0
        self._nvml_ok: bool | None = None

    def sample(self) -> None:
        try:
            entry = sample_round(self.nvml)
        except Exception:  # a bug or an unexpected binding error: log it, keep the agent alive
            log.exception("reading the GPUs failed")
            return
        node_error = next((e for e in entry["errors"] if e["index"] is None), None)
        nvml_ok = node_error is None
        if nvml_ok != self._nvml_ok:  # log state changes only, not every 10 s
            if nvml_ok:
                log.info("NVML: %d GPU(s) read, %d with errors", len(entry["samples"]), len(entry["errors"]))
            else:
                log.error("%s", node_error["message"])
            self._nvml_ok = nvml_ok
        batcher = self.shipper.batcher
        if batcher.add(entry):
            dropped = batcher.dropped_since_success
            if dropped == 1 or dropped % 60 == 0:
                log.warning(
                    "buffer full (%d rounds): dropping the oldest; %d dropped since the server last accepted",
                    batcher.max_rounds,
                    dropped,
                )

    def tick(self, now: float) -> float:
        """Sample if due, send if due; returns the monotonic time of the next thing to do."""
        if now >= self.next_sample:
            self.sample()
            self.next_sample = (self.next_sample or now) + self.interval
            if self.next_sample <= now:  # fell behind (suspend, slow NVML, long flush): skip, don't burst
                self.next_sample = now + self.interval
        if self.shipper.due(now):
            try:
                self.shipper.flush(now, deadline=self.shipper.clock() + self.interval)
            except Exception:
                log.exception("sending failed unexpectedly")
                self.shipper.next_attempt = now + self.shipper._backoff()
        wake = self.next_sample
        if len(self.shipper.batcher):
            wake = min(wake, max(self.shipper.next_attempt, now))
        return wake

    def run(self, stop: threading.Event, clock=time.monotonic) -> None:
        while not stop.is_set():
            wake = self.tick(clock())
            stop.wait(max(0.0, wake - clock()))
        if len(self.shipper.batcher) and not self.shipper.in_outage:  # last try: the buffer is in memory only
            self.shipper.flush(clock(), deadline=self.shipper.clock() + self.shipper.timeout)


# ---------------------------------------------------------------------------------------------------- CLI


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="gpupool-agent",
        description="Read every GPU through NVML and POST the samples to the gpupool portal.",
    )
    parser.add_argument("--url", help="portal base URL, e.g. https://gpupool.example.org")
    parser.add_argument("--token-file", help="file holding the node's bearer token (mode 600)")
    parser.add_argument("--node", help="node name as Slurm knows it (default: short hostname)")
    parser.add_argument("--interval", type=float, default=10.0, help="seconds between samples (default 10)")
    parser.add_argument("--buffer", type=int, default=360, help="rounds kept during an outage (default 360)")
    parser.add_argument("--per-post", type=int, default=30, help="rounds sent per POST when catching up")
    parser.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout in seconds (default 10)")
    parser.add_argument("--max-backoff", type=float, default=60.0, help="backoff cap in seconds (default 60)")
    parser.add_argument("--auth-retry", type=float, default=300.0, help="seconds between tries after 401/403")
    parser.add_argument("--once", action="store_true", help="sample and send once, then exit")
    parser.add_argument("--dry-run", action="store_true", help="print the JSON batch instead of sending it")
    parser.add_argument("--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    args = parser.parse_args(argv)
    if args.interval <= 0 or args.timeout <= 0 or args.buffer < 1 or args.per_post < 1:
        parser.error("--interval and --timeout must be positive, --buffer and --per-post at least 1")
    if not args.dry_run:
        if not args.url or not args.token_file:
            parser.error("--url and --token-file are required (or use --dry-run)")
        scheme = urllib.parse.urlsplit(args.url).scheme
        if scheme not in ("http", "https"):
            parser.error(f"--url must be http:// or https://, not {args.url!r}")
    return args


def default_node_name() -> str:
    return socket.gethostname().split(".")[0]


def _load_pynvml():
    try:
        import pynvml
    except ImportError:
        raise ConfigError("the pynvml module is missing: pip install nvidia-ml-py") from None
    return pynvml


def main(argv: list[str] | None = None, *, nvml=None, opener=None, stdout=None) -> int:
    """Exit codes: 0 ok, 1 --once failed (NVML unavailable or not accepted), 2 configuration error."""
    args = parse_args(argv)
    logging.basicConfig(level=args.log_level, format="gpupool-agent %(levelname)s %(message)s")
    log.setLevel(args.log_level)
    stdout = stdout or sys.stdout
    node = args.node or default_node_name()
    try:
        token = None if args.dry_run else TokenFile(args.token_file)
        nvml = nvml if nvml is not None else _load_pynvml()
    except ConfigError as exc:
        print(f"gpupool-agent: error: {exc}", file=sys.stderr)
        return 2
    if args.url and urllib.parse.urlsplit(args.url).scheme == "http":
        host = urllib.parse.urlsplit(args.url).hostname or ""
        if host not in ("localhost", "127.0.0.1", "::1"):
            log.warning("sending the token over plain http to %s; use https", host)

    if args.once:
        entry = sample_round(nvml)
        node_failed = any(e["index"] is None for e in entry["errors"])
        for error in entry["errors"]:
            log.error("GPU %s: %s", "-" if error["index"] is None else error["index"], error["message"])
        payload = build_payload(node, [entry])
        if args.dry_run:
            json.dump(payload, stdout, indent=2)
            stdout.write("\n")
            stdout.flush()
            return 1 if node_failed else 0
        result = send(args.url, token.token, payload, opener, args.timeout)
        outcome = classify(result.status)
        if outcome != OK:
            what = f"HTTP {result.status}" if result.status else "no answer"
            log.error("not accepted (%s, %s): %s", what, outcome, result.body[:MAX_LOGGED_BODY])
            return 1
        log.info(
            "sent %d sample(s), %d error(s): %s", len(payload["samples"]), len(payload["errors"]), result.body[:200]
        )
        return 1 if node_failed else 0

    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    if args.dry_run:
        while not stop.is_set():
            json.dump(build_payload(node, [sample_round(nvml)]), stdout)
            stdout.write("\n")
            stdout.flush()
            stop.wait(args.interval)
        return 0
    batcher = Batcher(args.buffer, args.per_post)
    shipper = Shipper(
        args.url,
        token,
        node,
        batcher,
        opener=opener,
        timeout=args.timeout,
        backoff_max=args.max_backoff,
        auth_retry=args.auth_retry,
    )
    log.info("node %s: sampling every %.0f s, sending to %s", node, args.interval, ingest_url(args.url))
    Agent(nvml, shipper, args.interval).run(stop)
    log.info("stopped (%d round(s) unsent, %d dropped in total)", len(batcher), batcher.dropped_total)
    return 0


if __name__ == "__main__":
    sys.exit(main())
