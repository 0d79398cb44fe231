"""Two figures of the job path, measured in one run on the real dev cluster:

1. Submit latency: portal (API POST -> job accepted by Slurm: the API's answer when it carries
   the Slurm id (inline submission), else the PENDING push on the WebSocket) over raw
   slurmrestd (POST /job/submit) and over `sbatch` as the user, as ratios of medians. Each
   POST follows an `sbatch` of its own, so the two meet the same load.
2. Live-status delay: from Slurm's own start time of a job to the RUNNING message on the
   WebSocket, p50 and p95. Slurm's start_time has 1 s resolution, so the delay is also
   given from the job's first instruction (its batch script prints a nanosecond clock).

    .venv/bin/python bench/submit_and_live_status.py [--jobs 20] [--interval 2]

Starts the web process, a Celery worker and beat on a throwaway database (as `make dev` runs them),
with the mirror every --interval seconds (the product default is 2).
"""

import json
import os
import time

from _common import bench_database, describe, make_user, options, percentile, retire_user


def main():
    args = options(jobs=20, interval=2.0)
    os.environ["CLUSTER_SYNC_INTERVAL_SECONDS"] = str(args.interval)

    import requests
    from django.test import Client
    from websockets.sync.client import connect

    from accounts.models import ApiToken
    from cluster.clusters.services import rest_client
    from jobs.models import Job
    from testing.servers import portal_stack
    from testing.slurm import submission, wait_for_state

    with bench_database():
        user = make_user("sub")
        try:
            slurm = rest_client(user.profile.cluster_username)
            raw = []
            for _ in range(args.jobs):
                job_submission = submission("true", tres_per_node="gres/shard:a100:1")
                started = time.perf_counter()
                job_id = slurm.submit_job(job_submission)
                raw.append(time.perf_counter() - started)
                wait_for_state(slurm, job_id, {"COMPLETED", "FAILED"})

            sbatch = []
            _token, key = ApiToken.issue(user, "bench")
            headers = {"Authorization": f"Bearer {key}"}
            browser = Client()
            browser.force_login(user)
            cookie = browser.cookies["sessionid"].value
            body = {
                "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                "gpu_type": "a100",
                "gpu_memory_gb": 4,
                "time_limit_minutes": 5,
            }
            accepted, in_slurm, slurm_delay, job_delay = [], [], [], []
            with portal_stack(worker=True, beat=True) as base_url:
                ws_url = base_url.replace("http://", "ws://") + "/ws/jobs/"
                with connect(ws_url, additional_headers={"Cookie": f"sessionid={cookie}", "Origin": base_url}) as ws:
                    for _ in range(args.jobs):
                        # sbatch right before each POST: both meet the same load (a run on a
                        # shared machine swings either by 2x), so their ratio is fair.
                        sbatch.append(_sbatch_seconds(user.profile.cluster_username))
                        command = 'echo "START $(date +%s.%N)"; sleep 3'
                        started = time.perf_counter()
                        response = requests.post(
                            f"{base_url}/api/v1/jobs/", json={**body, "command": command}, headers=headers, timeout=30
                        )
                        accepted.append(time.perf_counter() - started)
                        assert response.status_code == 201, response.text
                        job_pk = response.json()["id"]
                        seen_pending = seen_running = False
                        if response.json()["slurm_job_id"]:
                            # Submitted inline: in Slurm when the API answered (SUBMIT_INLINE).
                            in_slurm.append(accepted[-1])
                            seen_pending = True
                        while not seen_running:
                            message = json.loads(ws.recv(timeout=120))["job"]
                            if message["id"] != job_pk:
                                continue
                            now = time.time()
                            if message["slurm_job_id"] and not seen_pending:
                                in_slurm.append(time.perf_counter() - started)
                                seen_pending = True
                            if message["state"] in {"RUNNING", "COMPLETED"}:
                                seen_running = True
                                job = Job.objects.get(pk=job_pk)
                                slurm_delay.append(now - job.start_time.timestamp())
                                job_delay.append(now - _job_start_clock(job))
                        wait_for_state(slurm, Job.objects.get(pk=job_pk).slurm_job_id, {"COMPLETED"})
        finally:
            retire_user(user)

    import statistics

    print(describe("raw slurmrestd submit", raw))
    print(describe("portal API accept (201)", accepted))
    print(describe("portal submit, API POST to job in Slurm (push)", in_slurm))
    print(describe("sbatch through the CLI (as the user, in the cluster's root)", sbatch))
    print(f"RATIO submit latency portal/raw (medians): {statistics.median(in_slurm) / statistics.median(raw):.1f}")
    ratio = statistics.median(in_slurm) / statistics.median(sbatch)
    print(f"RATIO submit latency portal/sbatch (medians): {ratio:.2f}")
    print(f"RATIO API accept/raw (medians): {statistics.median(accepted) / statistics.median(raw):.2f}")
    print(
        describe(
            f"live-status delay from Slurm start_time (1 s resolution, mirror every {args.interval} s)", slurm_delay
        )
    )
    print(describe("live-status delay from the job's first instruction", job_delay))
    print(f"live-status p50={percentile(job_delay, 0.5) * 1000:.0f} ms p95={percentile(job_delay, 0.95) * 1000:.0f} ms")


def _sbatch_seconds(user_name: str) -> float:
    """One `sbatch` of a trivial typed-GPU job as the user, timed around the command alone."""
    import subprocess

    from django.conf import settings

    command = [
        *settings.SLURM_CLI_PREFIX,
        "runuser",
        "-u",
        user_name,
        "--",
        "sbatch",
        "--parsable",
        f"--account={settings.SLURM_ACCOUNT}",
        "--gres=shard:a100:1",
        "-t",
        "1",
        "-o",
        "/dev/null",
        "-D",
        "/tmp",
        "--wrap",
        "true",
    ]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"sbatch failed: {done.stderr}")
    return elapsed


def _job_start_clock(job) -> float:
    from jobs.logs import local_log_path, read_tail

    for _ in range(100):
        tail = read_tail(local_log_path(job.standard_output, job.cluster_user), 64 * 1024)
        if tail.exists:
            for line in tail.text.splitlines():
                if line.startswith("START "):
                    return float(line.split()[1])
        time.sleep(0.05)
    raise RuntimeError(f"job {job.pk} printed no START line")


if __name__ == "__main__":
    main()
