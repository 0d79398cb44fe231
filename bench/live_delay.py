"""Live delay: from slurmctld's own record of a job's change to the portal's WebSocket message,
with Slurm's job events (deploy/slurm-events/) and with the polling mirror alone, in one run.

    .venv/bin/python bench/live_delay.py [--jobs 10] [--interval 2]

slurmctld's record is its log line, stamped to the millisecond: `sched: Allocate JobId=N`
(start), `_job_complete: JobId=N done` (end). slurmctld logs no line for a cancel over REST
at its default level, so a cancel is timed from just before the cancel request (an upper
bound: the change happens inside that request), and a requeue (`scontrol requeue`) likewise. the web process,
a worker and beat serve a throwaway database on port 8000, where the dev cluster's sender
posts (PORT when the cluster was started); "polling only" is the same stack with events off.
"""

import json
import os
import re
import time
from datetime import UTC, datetime
from pathlib import Path

from _common import bench_database, make_user, options, percentile, retire_user

LOG_LINE = re.compile(r"^\[(?P<at>[0-9T:.-]+)\] (?P<text>.*)$")
KINDS = {
    "start": re.compile(r"(?:sched: Allocate|_start_job: Started) JobId=(\d+)"),
    "end": re.compile(r"_job_complete: JobId=(\d+) done"),
}


def slurmctld_times(log_path: Path, since_offset: int) -> dict[tuple[str, int], float]:
    """(kind, Slurm job id) -> epoch seconds of slurmctld's first line for it, after `since_offset`."""
    found: dict[tuple[str, int], float] = {}
    with open(log_path, "rb") as log:
        log.seek(since_offset)
        for raw in log:
            match = LOG_LINE.match(raw.decode(errors="replace").rstrip())
            if not match:
                continue
            for kind, pattern in KINDS.items():
                hit = pattern.search(match["text"])
                if hit:
                    at = datetime.fromisoformat(match["at"]).replace(tzinfo=UTC).timestamp()
                    found.setdefault((kind, int(hit.group(1))), at)
    return found


def run_mode(label, extra_env, user, jobs, log_path):
    from django.test import Client
    from websockets.sync.client import connect

    from cluster.clusters.services import rest_client, slurm_cli
    from testing.servers import portal_stack
    from testing.slurm import submission

    slurm = rest_client(user.profile.cluster_username)
    browser = Client()
    browser.force_login(user)
    cookie = browser.cookies["sessionid"].value
    seen: dict[tuple[str, int], float] = {}
    sent: dict[int, float] = {}  # cancels: when the request went out
    offset = log_path.stat().st_size
    with portal_stack(worker=True, beat=True, extra_env=extra_env, port=8000) as base_url:
        ws_url = base_url.replace("http://", "ws://") + "/ws/jobs/"
        with connect(ws_url, additional_headers={"Cookie": f"sessionid={cookie}", "Origin": base_url}) as ws:

            def wait(job_id, states, timeout=60):
                deadline = time.monotonic() + timeout
                while time.monotonic() < deadline:
                    message = json.loads(ws.recv(timeout=timeout))["job"]
                    if message["slurm_job_id"] == job_id and message["state"] in states:
                        return time.time()
                raise TimeoutError(f"{label}: job {job_id} never reached {states}")

            for _ in range(jobs):
                short = slurm.submit_job(
                    submission("sleep 2", tres_per_node="gres/gpu:rtx4090:1", time_limit_minutes=2)
                )
                seen[("start", short)] = wait(short, {"RUNNING", "COMPLETED"})
                seen[("end", short)] = wait(short, {"COMPLETED"})
                running = slurm.submit_job(submission("sleep 60", tres_per_node="gres/gpu:rtx4090:1"))
                wait(running, {"RUNNING"})
                sent[running] = time.time()
                slurm.cancel_job(running)
                seen[("cancel", running)] = wait(running, {"CANCELLED"})
                requeued = slurm.submit_job(submission("sleep 60", tres_per_node="gres/gpu:rtx4090:1"))
                wait(requeued, {"RUNNING"})
                sent[requeued] = time.time()
                slurm_cli().requeue_job(requeued)
                seen[("requeue", requeued)] = wait(requeued, {"PENDING", "REQUEUED"})
                slurm.cancel_job(requeued)
                pending = slurm.submit_job(submission("sleep 60", tres_per_node="gres/gpu:rtx4090:1"))
                slurm_cli().run("scontrol", "hold", str(pending), check=False)
                state = wait(pending, {"PENDING", "RUNNING"})
                del state
                sent[pending] = time.time()
                slurm.cancel_job(pending)
                seen[("cancel-pending", pending)] = wait(pending, {"CANCELLED"})
    recorded = slurmctld_times(log_path, offset)
    delays: dict[str, list[float]] = {}
    for (kind, job_id), at in seen.items():
        source = sent.get(job_id) if kind.startswith(("cancel", "requeue")) else recorded.get((kind, job_id))
        if source is not None:
            delays.setdefault(kind, []).append(at - source)
    for kind, values in sorted(delays.items()):
        print(
            f"{label:13s} {kind:15s} n={len(values):3d} p50={percentile(values, 0.5) * 1000:6.0f} ms "
            f"p95={percentile(values, 0.95) * 1000:6.0f} ms"
        )
    return delays


def main():
    args = options(jobs=10, interval=2.0)
    os.environ["CLUSTER_SYNC_INTERVAL_SECONDS"] = str(args.interval)
    from django.conf import settings

    if not settings.SLURM_EVENTS_SECRET:
        raise SystemExit("no events secret: start the dev cluster (make cluster-up) first")
    log_path = Path(settings.DEVCLUSTER_DIR) / "root/var/log/slurm/slurmctld.log"
    with bench_database():
        user = make_user("live")
        try:
            run_mode("events", {}, user, args.jobs, log_path)
            run_mode(
                "polling only",
                {"SLURM_EVENTS_SECRET": "", "SLURM_EVENTS_SECRET_FILE": "/nonexistent"},
                user,
                args.jobs,
                log_path,
            )
        finally:
            retire_user(user)


if __name__ == "__main__":
    main()
