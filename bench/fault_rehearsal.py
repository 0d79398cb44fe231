"""Fault rehearsal: the production shape under load, each part killed and restarted in turn.

    .venv/bin/python bench/fault_rehearsal.py [--users 3] [--settle 15] [--down 5] [--keep-up] [--only slurm]

Brings up deploy/local-production.sh's shape (nginx with TLS, two web processes, two
Celery workers, one beat, a PostgreSQL and a Redis of its own, the dev cluster SLURM_RELEASE),
then, while simulated users submit jobs over the API with tokens (a few of them cancelled),
read their jobs and watch them on the WebSocket, all through nginx, it restarts Slurm's own
slurmctld, slurmdbd and slurmrestd in turn (SIGTERM by the dev cluster's PIDs, down for --down
seconds, then `cluster.sh up`), kills (SIGKILL, by the PIDs local-production.sh recorded: only
its own processes) and restarts in turn a web process, a worker, the beat, Redis and
PostgreSQL, restarts the two web processes one after the other (an upgrade's rolling restart),
reloads nginx, and starts two beats at once.

Then it checks, once every job has ended and been metered:
- jobs: every job the API accepted (201) is in Slurm exactly once (slurmdbd's records of the
  users' jobs against the portal's rows); a job whose 201 was lost with its web process is
  counted apart, and must be in Slurm once too; every accepted cancel took effect;
- charges: every job that ran has one usage record, charged once; credit spends once each;
- grants: each user's sign-up and tutorial grants written once;
- live pages: each user's WebSocket, reconnecting and catching up as the page does
  (static/js/job_live.js: one poll on every open), ends with every job's final state;
- two beats: only one sends periodic tasks.

It prints, per fault: requests served, errors, p95, the recovery time (from the kill until the
process is back and requests stopped failing) and what was lost or doubled. Figures, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
LOCAL_PRODUCTION = BASE_DIR / "deploy" / "local-production.sh"
RUN = Path(os.environ.get("LOCAL_PRODUCTION_DIR", BASE_DIR / "var" / "production")).resolve()
HTTPS_PORT = int(os.environ.get("HTTPS_PORT", "28443"))
BASE_URL = f"https://127.0.0.1:{HTTPS_PORT}"
# The rehearsal's own settings on top of the production environment: every simulated user
# comes through one address, and charges should land within the run.
EXTRA_ENV = """SUBMIT_RATE_LIMIT_PER_MINUTE=1000
SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE=100000
METERING_INTERVAL_SECONDS=10
METERING_WINDOW_HOURS=1
"""
JOB = {
    "name": "rehearsal",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_memory_gb": 4,
    "command": "sleep 1",
    "time_limit_minutes": 2,
}


@dataclass
class Request:
    at: float
    kind: str
    seconds: float
    status: int  # 0: no answer (connection refused, reset, timeout)

    @property
    def error(self) -> bool:
        return self.status == 0 or self.status >= 500 or self.status == 429


@dataclass
class Phase:
    name: str
    start: float
    end: float = 0.0
    killed: float | None = None
    back: float | None = None


@dataclass
class Load:
    cert: str
    users: list = field(default_factory=list)  # (user, token key, session key)
    requests: list[Request] = field(default_factory=list)
    accepted: dict[int, float] = field(default_factory=dict)  # job id -> when the 201 came
    cancels: dict[int, float] = field(default_factory=dict)  # job id -> when the cancel was accepted
    seen: dict[int, dict[int, str]] = field(default_factory=lambda: defaultdict(dict))  # user -> job -> state
    reconnects: list[tuple[float, float]] = field(default_factory=list)
    reasons: Counter = field(default_factory=Counter)  # (request kind, what went wrong)
    stop_load: threading.Event = field(default_factory=threading.Event)
    stop_watch: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def record(self, kind, started, status, reason: BaseException | None = None):
        with self.lock:
            self.requests.append(Request(started, kind, time.monotonic() - started, status))
            if reason is not None:
                self.reasons[(kind, type(reason).__name__)] += 1
            elif status >= 500 or status == 429:
                self.reasons[(kind, f"HTTP {status}")] += 1


def lp(*args, env=None) -> str:
    done = subprocess.run([str(LOCAL_PRODUCTION), *args], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"local-production.sh {' '.join(args)} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def pid_of(name: str) -> int:
    return int((RUN / "run" / f"{name}.pid").read_text().strip())


def kill(name: str) -> None:
    """SIGKILL one of local-production.sh's processes by its recorded PID. Each runs in a session
    of its own (setsid), so its process group is it and its children (a worker's pool, the
    postmaster's backends): all ours, and killed together, as a crash of the process would."""
    pid = pid_of(name)
    if os.getpgid(pid) == pid:
        os.killpg(pid, signal.SIGKILL)
    else:
        os.kill(pid, signal.SIGKILL)


def log_size(name: str) -> int:
    path = RUN / "log" / f"{name}.log"
    return path.stat().st_size if path.exists() else 0


def wait_log(name: str, offset: int, needle: str, timeout: float = 60) -> bool:
    path = RUN / "log" / f"{name}.log"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(path, "rb") as log:
            log.seek(offset)
            if needle.encode() in log.read():
                return True
        time.sleep(0.2)
    return False


# --- the simulated users ------------------------------------------------------------------------
def api_session(load: Load, key: str):
    import requests

    http = requests.Session()
    # The machine's REQUESTS_CA_BUNDLE would win over `verify` (requests merges the environment
    # last), and no proxy stands between this process and 127.0.0.1.
    http.trust_env = False
    http.verify = load.cert
    http.headers["Authorization"] = f"Bearer {key}"
    return http


def submitter(load: Load, index: int, every: float) -> None:
    import requests

    from credits.tutorial import TUTORIAL_SPEC

    _user, key, _session = load.users[index]
    http = api_session(load, key)
    to_cancel: list[tuple[float, int]] = []
    count = 0
    while not load.stop_load.is_set():
        count += 1
        body = dict(JOB)
        if count == 1:
            body = {**TUTORIAL_SPEC, "time_limit_minutes": 2}  # the tutorial grant, once
        elif count % 6 == 0:
            body["command"] = "sleep 30"  # cancelled below
        started = time.monotonic()
        status, reason = 0, None
        try:
            response = http.post(f"{BASE_URL}/api/v1/jobs/", json=body, timeout=15)
            status = response.status_code
            if status == 201:
                job_id = response.json()["id"]
                with load.lock:
                    load.accepted[job_id] = time.monotonic()
                if body["command"] == "sleep 30":
                    to_cancel.append((time.monotonic() + 3, job_id))
        except requests.RequestException as exc:
            reason = exc
        load.record("submit", started, status, reason)
        for due, job_id in list(to_cancel):
            if due <= time.monotonic():
                to_cancel.remove((due, job_id))
                started = time.monotonic()
                status, reason = 0, None
                try:
                    status = http.post(f"{BASE_URL}/api/v1/jobs/{job_id}/cancel/", timeout=15).status_code
                    if status == 200:
                        with load.lock:
                            load.cancels[job_id] = time.monotonic()
                except requests.RequestException as exc:
                    reason = exc
                # 409: not in Slurm yet or already ended; a refusal, not a failure.
                load.record("cancel", started, status, reason)
        load.stop_load.wait(every * random.uniform(0.8, 1.2))


def reader(load: Load, index: int, every: float) -> None:
    import requests

    _user, key, _session = load.users[index]
    http = api_session(load, key)
    while not load.stop_load.is_set():
        started = time.monotonic()
        status, reason, jobs = 0, None, []
        try:
            response = http.get(f"{BASE_URL}/api/v1/jobs/?page_size=20", timeout=15)
            status = response.status_code
            if status == 200:
                jobs = response.json()["results"]
        except (requests.RequestException, ValueError) as exc:
            reason = exc
        load.record("list", started, status, reason)
        if jobs:
            job_id = random.choice(jobs)["id"]
            started = time.monotonic()
            status, reason = 0, None
            try:
                status = http.get(f"{BASE_URL}/api/v1/jobs/{job_id}/", timeout=15).status_code
            except requests.RequestException as exc:
                reason = exc
            load.record("read", started, status, reason)
        load.stop_load.wait(every * random.uniform(0.8, 1.2))


def catch_up(http, seen: dict[int, str]) -> None:
    """What the page does on every (re)connect (job_live.js: poll on open): read the jobs' states."""
    url = f"{BASE_URL}/api/v1/jobs/?page_size=200"
    while url:
        response = http.get(url, timeout=15)
        response.raise_for_status()
        page = response.json()
        for job in page["results"]:
            seen[job["id"]] = job["state"]
        url = page.get("next")


def watcher(load: Load, index: int) -> None:
    import requests
    from websockets.exceptions import WebSocketException
    from websockets.sync.client import connect

    user, key, session_key = load.users[index]
    http = api_session(load, key)
    context = ssl.create_default_context(cafile=load.cert)
    headers = {"Cookie": f"sessionid={session_key}", "Origin": BASE_URL}
    seen = load.seen[user.pk]
    lost_at = None
    while not load.stop_watch.is_set():
        try:
            with connect(
                f"wss://127.0.0.1:{HTTPS_PORT}/ws/jobs/", ssl=context, additional_headers=headers, open_timeout=5
            ) as ws:
                catch_up(http, seen)
                if lost_at is not None:
                    with load.lock:
                        load.reconnects.append((lost_at, time.monotonic()))
                    lost_at = None
                while not load.stop_watch.is_set():
                    try:
                        message = json.loads(ws.recv(timeout=1))
                    except TimeoutError:
                        continue
                    if message.get("type") == "job":
                        seen[message["job"]["id"]] = message["job"]["state"]
        except (WebSocketException, OSError, requests.RequestException, TimeoutError, ValueError):
            if lost_at is None:
                lost_at = time.monotonic()
            load.stop_watch.wait(1.0)  # the page's first retry is after 1 s


# --- the faults ------------------------------------------------------------------------------------
def restart_and_wait(name: str) -> None:
    """Start `name` again with local-production.sh and wait until it is of use."""
    offset = log_size(name)
    lp("start", name)  # web: waits for /readyz; redis: PING; postgres: pg_isready
    if name.startswith("worker"):
        wait_log(name, offset, " ready.")
    elif name == "beat":
        wait_log(name, offset, "beat: Starting")


def fault(phases: list[Phase], name: str, target: str, down: float, settle: float, action=None) -> None:
    phase = Phase(name, time.monotonic())
    phases.append(phase)
    time.sleep(3)  # load before the fault
    phase.killed = time.monotonic()
    if action is not None:
        action()
    else:
        kill(target)
        time.sleep(down)
        restart_and_wait(target)
    phase.back = time.monotonic()
    time.sleep(settle)
    phase.end = time.monotonic()


# Slurm's own daemons, restarted as an upgrade restarts them (SIGTERM: slurmctld saves its state,
# slurmdbd its queue): by the PIDs the dev cluster recorded, then `cluster.sh up`, which starts
# again only what is not running.
CLUSTER = BASE_DIR / "deploy" / "devcluster" / "cluster.sh"
SLURM_DAEMONS = ("slurmctld", "slurmdbd", "slurmrestd")


def restart_slurm_daemon(name: str, down: float) -> None:
    from django.conf import settings

    pid = int((Path(settings.DEVCLUSTER_DIR) / "pids" / f"{name}.pid").read_text().strip())
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    time.sleep(down)
    env = {**os.environ, "SLURM_RELEASE": settings.SLURM_RELEASE}
    done = subprocess.run([str(CLUSTER), "up"], capture_output=True, text=True, env=env, timeout=300)
    if done.returncode != 0:
        raise RuntimeError(f"cluster.sh up after {name} failed:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")


def two_beats(phases: list[Phase], settle: float) -> dict:
    """Stop the beat, then start it and a second one at the same moment; count who sends."""
    phase = Phase("two beats at once", time.monotonic())
    phases.append(phase)
    lp("stop", "beat")
    offsets = {"beat": log_size("beat"), "beat2": log_size("beat2")}
    env = {**os.environ}
    log = open(RUN / "log" / "beat2.log", "ab")  # noqa: SIM115
    phase.killed = time.monotonic()
    second = subprocess.Popen(
        [
            str(BASE_DIR / ".venv" / "bin" / "celery"), "-A", "gpupool", "beat", "--loglevel=INFO",
            "--schedule", str(RUN / "var" / "celerybeat-schedule-2"),
        ],
        cwd=BASE_DIR, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    restart_and_wait("beat")
    phase.back = time.monotonic()
    time.sleep(settle + 10)
    sends = {}
    for name, offset in offsets.items():
        with open(RUN / "log" / f"{name}.log", "rb") as text:
            text.seek(offset)
            sends[name] = Counter(
                line.split("Sending due task ")[1].split(" ")[0]
                for line in text.read().decode(errors="replace").splitlines()
                if "Sending due task " in line
            )
    second.terminate()  # our own child, by its handle
    try:
        second.wait(20)
    except subprocess.TimeoutExpired:
        second.kill()
    log.close()
    phase.end = time.monotonic()
    return sends


# nginx's `fail_timeout` for a web process (deploy/local-production.sh's upstream): after a process
# failed a request, nginx sends it nothing for this long, even once it is back.
NGINX_FAIL_TIMEOUT = 5.0


def restart_web_one_at_a_time() -> None:
    """An upgrade's restart of the web tier: each web process stopped (SIGTERM: it stops listening and
    finishes what it serves) and started again, waiting until it answers /readyz, then until nginx
    sends it requests again, before the next. Stopping the second while nginx still holds the first
    as failed leaves nginx no process at all: 502 for everyone."""
    for name in ("web1", "web2"):
        lp("stop", name)
        restart_and_wait(name)
        time.sleep(NGINX_FAIL_TIMEOUT + 1)


def reload_nginx() -> None:
    os.kill(pid_of("nginx"), signal.SIGHUP)  # graceful: new workers, old ones finish their requests
    time.sleep(1)


# --- the checks ----------------------------------------------------------------------------------
def wait_until(what: str, probe, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return True
        time.sleep(2)
    print(f"  (gave up waiting for {what} after {timeout:.0f} s)")
    return False


def phase_of(phases: list[Phase], moment: float) -> str:
    for phase in phases:
        if phase.start <= moment < phase.end:
            return phase.name
    return phases[-1].name if moment >= phases[-1].end else phases[0].name


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=3)
    parser.add_argument("--submit-every", type=float, default=3.0, help="seconds between one user's submissions")
    parser.add_argument("--read-every", type=float, default=1.0, help="seconds between one user's reads")
    parser.add_argument("--down", type=float, default=5.0, help="seconds a killed process stays down")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds of load after each restart")
    parser.add_argument("--keep-up", action="store_true", help="leave the shape running afterwards")
    parser.add_argument(
        "--only",
        choices=("all", "portal", "slurm", "web"),
        default="all",
        help="the portal's processes killed, Slurm's daemons restarted, both (the default), or the web tier's "
        "rolling restart alone",
    )
    parser.add_argument(
        "--reads-only",
        action="store_true",
        help="no submissions, no Slurm users: the faults under reads and sockets alone (a check of the rehearsal)",
    )
    args = parser.parse_args()

    extra = RUN / "rehearsal.env"
    RUN.mkdir(parents=True, exist_ok=True)
    extra.write_text(EXTRA_ENV)
    env = {**os.environ, "EXTRA_ENV": str(extra)}
    print("bringing up the production shape (deploy/local-production.sh up)...", flush=True)
    lp("down", env=env)
    lp("up", env=env)
    for line in (RUN / "production.env").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            os.environ[name] = value
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    sys.path.insert(0, str(BASE_DIR / "bench"))
    from _common import make_user, percentile, retire_user, signed_in_session

    from accounts.models import ApiToken
    from credits.actions import grants

    load = Load(cert=str(RUN / "tls" / "cert.pem"))
    run_tag = datetime.now(UTC).strftime("%H%M%S")
    started_at = datetime.now(UTC) - timedelta(minutes=1)
    print(f"provisioning {args.users} users...", flush=True)
    for index in range(args.users):
        user = make_user(f"fr{run_tag}u{index}", plan="enterprise", provision=not args.reads_only)
        grants.email_verified(user.pk)  # the sign-up grant; the tutorial's comes with its job
        _token, key = ApiToken.issue(user, "rehearsal")
        load.users.append((user, key, signed_in_session(user)))

    threads = []
    for index in range(args.users):
        for target, extra_args in ((submitter, (args.submit_every,)), (reader, (args.read_every,)), (watcher, ())):
            if target is submitter and args.reads_only:
                continue
            thread = threading.Thread(target=target, args=(load, index, *extra_args), daemon=True)
            thread.start()
            threads.append(thread)

    phases: list[Phase] = []
    beat_sends = {}
    try:
        baseline = Phase("no fault", time.monotonic())
        phases.append(baseline)
        time.sleep(args.settle)
        baseline.end = time.monotonic()
        if args.only in ("all", "slurm"):
            for daemon in SLURM_DAEMONS:
                name = f"{daemon} restarted"
                print(f"{time.strftime('%H:%M:%S')} fault: {name}", flush=True)
                fault(phases, name, daemon, 0, args.settle, action=lambda d=daemon: restart_slurm_daemon(d, args.down))
        if args.only in ("all", "portal"):
            for name, target in (
                ("web process killed", "web1"),
                ("worker killed", "worker1"),
                ("beat killed", "beat"),
                ("Redis killed", "redis"),
                ("PostgreSQL killed", "postgres"),
            ):
                print(f"{time.strftime('%H:%M:%S')} fault: {name}", flush=True)
                fault(phases, name, target, args.down, args.settle)
        if args.only in ("all", "portal", "web"):
            print(f"{time.strftime('%H:%M:%S')} fault: web restarted one at a time", flush=True)
            fault(phases, "web rolling restart", "web", 0, args.settle, action=restart_web_one_at_a_time)
        if args.only in ("all", "portal"):
            print(f"{time.strftime('%H:%M:%S')} fault: nginx reloaded", flush=True)
            fault(phases, "nginx reloaded", "nginx", 0, args.settle, action=reload_nginx)
            print(f"{time.strftime('%H:%M:%S')} fault: two beats at once", flush=True)
            beat_sends = two_beats(phases, args.settle)
    finally:
        load.stop_load.set()
    print("load stopped; waiting for every job to end and be metered...", flush=True)
    drained = time.monotonic()

    from django.db import connections

    from billing.models import UsageRecord
    from cluster.clusters.services import rest_client
    from credits.models import LedgerEntry
    from jobs.models import FINAL_STATES, Job

    connections.close_all()  # the rehearsal's own connection died with PostgreSQL
    user_ids = [user.pk for user, _key, _session in load.users]
    ours = Job.objects.filter(owner_id__in=user_ids)
    wait_until("every job to end", lambda: not ours.exclude(state__in=FINAL_STATES).exists(), 300)
    ran = ours.filter(slurm_job_id__isnull=False, start_time__isnull=False)
    wait_until(
        "every run to be metered and charged",
        lambda: (
            UsageRecord.objects.filter(job__in=ran, charged_at__isnull=False).values("job").distinct().count()
            >= ran.count()
        ),
        180,
    )
    time.sleep(3)  # the last pushes reach the sockets
    load.stop_watch.set()
    wait_seconds = time.monotonic() - drained

    # Slurm's word: every job of these users that slurmdbd knows (they are new users: every one
    # of their jobs came from this rehearsal).
    cluster_users = {user.profile.cluster_username: user.pk for user, _key, _session in load.users}
    window_end = datetime.now(UTC) + timedelta(minutes=1)
    listing = [] if args.reads_only else rest_client().list_accounting(started_at, window_end)
    records = [record for record in listing if record.user_name in cluster_users]
    in_slurm = Counter(record.job_id for record in {record.job_id: record for record in records}.values())
    slurm_state = {record.job_id: record.state for record in records}
    submitted_at = {record.job_id: record.submit_time for record in records}

    rows = {job.pk: job for job in ours}
    problems: dict[str, Counter] = defaultdict(Counter)  # phase -> Counter(kind)
    t0 = time.monotonic()
    now_utc = datetime.now(UTC)

    def moment_of(when: datetime | None) -> float:  # wall clock -> this process's monotonic clock
        return t0 - (now_utc - when).total_seconds() if when else t0

    # Rows the API made carry a spec; a row the mirror made for these users (who never run
    # sbatch themselves) can only be a second copy of a job in Slurm.
    unacknowledged = [job for pk, job in rows.items() if pk not in load.accepted and job.spec]
    for job in rows.values():
        if not job.spec:
            problems[phase_of(phases, moment_of(job.created_at))]["jobs doubled"] += 1
    for pk, at in load.accepted.items():
        job = rows.get(pk)
        phase = phase_of(phases, at)
        if job is not None and job.slurm_job_id is None and job.state == "CANCELLED" and pk in load.cancels:
            continue  # cancelled (an accepted cancel) before it reached Slurm: never to be there
        if job is None or job.slurm_job_id is None:
            problems[phase]["jobs lost"] += 1
        elif in_slurm.get(job.slurm_job_id, 0) != 1:
            problems[phase]["jobs lost" if not in_slurm.get(job.slurm_job_id) else "jobs doubled"] += 1
    for job in unacknowledged:
        phase = phase_of(phases, moment_of(job.created_at))
        if job.slurm_job_id is None or in_slurm.get(job.slurm_job_id, 0) != 1:
            problems[phase]["unacknowledged jobs not in Slurm once"] += 1
    attached = Counter(job.slurm_job_id for job in rows.values() if job.slurm_job_id)
    for slurm_id in in_slurm:
        if attached.get(slurm_id, 0) != 1:  # in Slurm, but no row (a second submission) or two rows
            problems[phase_of(phases, moment_of(submitted_at.get(slurm_id)))]["jobs doubled"] += 1
    for pk, at in load.cancels.items():
        job = rows.get(pk)
        in_slurm_cancelled = job is not None and (
            job.slurm_job_id is None or slurm_state.get(job.slurm_job_id) == "CANCELLED"
        )  # not yet in Slurm when cancelled: the portal cancelled it before it went there
        if job is None or job.state != "CANCELLED" or not in_slurm_cancelled:
            problems[phase_of(phases, at)]["cancels lost"] += 1

    # Charges: one usage record per run, charged once; a credit spend at most once per record.
    usage = list(UsageRecord.objects.filter(user_id__in=user_ids))
    per_job = Counter(record.slurm_job_id for record in usage)
    accepted_or_created = {pk: load.accepted.get(pk) or moment_of(job.created_at) for pk, job in rows.items()}
    for job in ran:
        phase = phase_of(phases, accepted_or_created[job.pk])
        records_of_job = per_job.get(job.slurm_job_id, 0)
        if records_of_job == 0:
            problems[phase]["charges lost"] += 1
        elif records_of_job > 1:
            problems[phase]["charges doubled"] += 1
    for record in usage:
        if record.charged_at is None:
            problems[phase_of(phases, moment_of(record.metered_at))]["charges lost"] += 1
    spends = LedgerEntry.objects.filter(account__user_id__in=user_ids, kind="spend")
    spend_ids = Counter(record.credit_entry_id for record in usage if record.credit_entry_id)
    for entry in spends:
        if spend_ids.get(entry.pk, 0) != 1:
            problems[phase_of(phases, moment_of(entry.created_at))]["credit spends doubled"] += 1

    # Grants: each user's sign-up grant once; the tutorial's once when the tutorial completed.
    granted = Counter(
        LedgerEntry.objects.filter(account__user_id__in=user_ids, kind="grant").values_list(
            "account__user_id", "grant_kind"
        )
    )
    for user, _key, _session in load.users:
        tutorial_done = any(
            job.owner_id == user.pk
            and job.state == "COMPLETED"
            and job.spec.get("command", "").startswith('echo "Tutorial')
            for job in rows.values()
        )
        campaign = grants.enrollment_of(user.pk).campaign  # a campaign may grant nothing for one
        expected_grants = (
            ("signup", int(campaign.signup_gpu_seconds > 0)),
            ("tutorial", int(tutorial_done and campaign.tutorial_gpu_seconds > 0)),
        )
        for kind, expected in expected_grants:
            found = granted.get((user.pk, kind), 0)
            if found != expected:
                problems[phases[0].name]["grants lost" if found < expected else "grants doubled"] += 1

    # Live pages: each user's socket (with its catch-ups) ends with every job's final state.
    stale = Counter()
    for pk, job in rows.items():
        if load.seen[job.owner_id].get(pk) != job.state:
            stale[phase_of(phases, accepted_or_created[pk])] += 1

    # --- the figures ---
    print()
    print(
        f"{args.users} users through nginx ({BASE_URL}): a submission every {args.submit_every:.0f} s, "
        f"a read every {args.read_every:.0f} s, a WebSocket each; killed processes down {args.down:.0f} s"
    )
    header = (
        f"{'fault':<22} {'served':>6} {'errors':>6} {'p95 ms':>7} {'failing':>8} {'recovery':>9} "
        f"{'ws reconnects':>13}  lost / doubled"
    )
    print(header)
    print("-" * len(header))
    for phase in phases:
        inside = [request for request in load.requests if phase.start <= request.at < phase.end]
        served = [request for request in inside if not request.error]
        errors = [request for request in inside if request.error]
        p95 = percentile([request.seconds for request in served], 0.95) * 1000 if served else float("nan")
        recovery = failing = "-"
        if phase.killed is not None:
            # Failing: from the kill to the end of the last failed request; recovery: until the
            # process is back (of use again) and requests stopped failing, whichever is later.
            last_error = max((request.at + request.seconds for request in errors), default=phase.killed)
            failing = f"{last_error - phase.killed:.1f} s"
            recovery = f"{max(phase.back, last_error) - phase.killed:.1f} s"
        reconnects = [pair for pair in load.reconnects if phase.start <= pair[0] < phase.end]
        ws = f"{len(reconnects)}" + (f" ({max(back - lost for lost, back in reconnects):.1f} s)" if reconnects else "")
        found = problems.get(phase.name, Counter())
        lost = sum(count for kind, count in found.items() if "lost" in kind or "not in Slurm" in kind)
        doubled = sum(count for kind, count in found.items() if "doubled" in kind)
        detail = "" if not found else "  " + ", ".join(f"{kind}: {count}" for kind, count in sorted(found.items()))
        print(
            f"{phase.name:<22} {len(served):>6} {len(errors):>6} {p95:>7.0f} {failing:>8} {recovery:>9} {ws:>13}  "
            f"{lost} lost, {doubled} doubled (jobs, charges, grants){detail}"
        )
    reasons = ", ".join(f"{kind} {why}: {count}" for (kind, why), count in sorted(load.reasons.items()))
    print(f"errors: {reasons or 'none'}")
    print(
        f"jobs: {len(load.accepted)} accepted (201), {len(unacknowledged)} created with their answer lost, "
        f"{len(in_slurm)} in Slurm, {len(load.cancels)} cancels accepted; "
        f"{len(usage)} usage records, {spends.count()} credit spends; "
        f"grants {dict(Counter(kind for _user, kind in granted.elements()))}"
    )
    print(
        f"live pages: {len(rows) - sum(stale.values())} of {len(rows)} jobs shown in their final state "
        f"after {len(load.reconnects)} reconnects" + (f"; stale: {dict(stale)}" if stale else "")
    )
    if beat_sends:
        senders = [name for name, sent in beat_sends.items() if sum(sent.values())]
        print(
            f"two beats at once: {len(senders)} of 2 sent periodic tasks; "
            + "; ".join(f"{name}: {sum(sent.values())} sends" for name, sent in beat_sends.items())
        )
    print(f"drain after the load: {wait_seconds:.0f} s")
    total_lost = sum(count for found in problems.values() for kind, count in found.items() if "doubled" not in kind)
    total_doubled = sum(count for found in problems.values() for kind, count in found.items() if "doubled" in kind)
    print(f"TOTAL: {total_lost} lost, {total_doubled} doubled; live pages stale: {sum(stale.values())}")

    for user, _key, _session in load.users if not args.reads_only else []:
        try:
            retire_user(user)
        except Exception as exc:  # noqa: BLE001
            print(f"could not remove cluster user of {user.username}: {exc}")
    if not args.keep_up:
        lp("down")


if __name__ == "__main__":
    main()
