"""The mirror at scale, against the real dev cluster, in one run:

1. A pass with 1,000 and 5,000 of one user's held jobs queued, with 0 and 10 of them changed,
   against one raw `GET /jobs` of the same cluster (ratio), and the requests a quiet pass makes
   to slurmrestd (per second at the 2 s beat).
2. 5,000 jobs submitted at once, then cancelled at once (`scancel -u`): seconds from the end
   of the burst until the portal shows every one, with the real stack (web process, worker, beat,
   Slurm's job events); meanwhile another user's job starts and ends, and the delay of its
   updates (slurmctld's log to the portal's row) is the "held" figure.

    .venv/bin/python bench/mirror_passes.py [--sizes 1000,5000]

Leaves the cluster as it found it (the users' jobs are cancelled, their accounts removed).
"""

import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import bench_database, make_user, options, retire_user
from live_delay import slurmctld_times


def submit_held(client, count: int) -> list[int]:
    """`count` held jobs of the client's user, 8 submissions at a time."""
    from testing.slurm import submit_held as one_held

    with ThreadPoolExecutor(max_workers=8) as pool:
        return list(pool.map(lambda _: one_held(client, time_limit_minutes=5), range(count)))


class Counting:
    """A client that counts its requests to slurmrestd."""

    def __init__(self, client):
        self.client = client
        self.requests = 0
        original = client._request

        def counted(*args, **kwargs):
            self.requests += 1
            return original(*args, **kwargs)

        client._request = counted


def pass_costs(size: int, user, raw_client) -> None:
    from cluster.clusters.services import rest_client
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import Job

    slurm = rest_client(user.profile.cluster_username)
    ids = submit_held(slurm, size)
    service = rest_client()
    counter = Counting(service)
    while Job.objects.filter(slurm_job_id__in=ids).count() < size:
        mirror_jobs(service)
    quiet, changed, raw = [], [], []
    for round_ in range(5):
        counter.requests = 0
        started = time.perf_counter()
        mirror_jobs(service)
        quiet.append(time.perf_counter() - started)
        quiet_requests = counter.requests
        for job_id in ids[round_ * 10 : round_ * 10 + 10]:
            slurm.cancel_job(job_id)
        started = time.perf_counter()
        mirror_jobs(service)
        changed.append(time.perf_counter() - started)
        started = time.perf_counter()
        raw_client._request("GET", raw_client.adapter.slurm_path("jobs"))
        raw.append(time.perf_counter() - started)
    quiet_ms, changed_ms, raw_ms = (statistics.median(values) * 1000 for values in (quiet, changed, raw))
    print(
        f"{size} queued: quiet pass {quiet_ms:.0f} ms, 10 changed {changed_ms:.0f} ms, raw GET /jobs {raw_ms:.0f} ms; "
        f"RATIO quiet/raw {quiet_ms / raw_ms:.3f}, 10 changed/raw {changed_ms / raw_ms:.3f}; "
        f"requests in a quiet pass {quiet_requests} ({quiet_requests / 2:.1f}/s at the 2 s beat)"
    )
    slurm_cancel_all(user)
    while Job.objects.filter(slurm_job_id__in=ids).exclude(state="CANCELLED").exists():
        mirror_jobs(service)


def slurm_cancel_all(user) -> None:
    from cluster.clusters.services import slurm_cli

    slurm_cli().run("scancel", "-u", user.profile.cluster_username, check=False)


def mass_change(count: int, user, other, log_path: Path) -> None:
    from cluster.clusters.services import rest_client
    from jobs.models import Job
    from testing.servers import portal_stack
    from testing.slurm import submission

    slurm = rest_client(user.profile.cluster_username)
    theirs = rest_client(other.profile.cluster_username)
    with portal_stack(worker=True, beat=True, port=8000):
        offset = log_path.stat().st_size
        burst_started = time.monotonic()
        ids = submit_held(slurm, count)
        burst_ended = time.monotonic()
        burst_ended_wall = time.time()
        other_job = theirs.submit_job(submission("sleep 3", tres_per_node="gres/gpu:a100:1", time_limit_minutes=2))
        seen_other: dict[str, float] = {}
        while True:
            shown = Job.objects.filter(slurm_job_id__in=ids).count()
            row = Job.objects.filter(slurm_job_id=other_job).values("state").first()
            if row and row["state"] in ("RUNNING", "COMPLETED") and "start" not in seen_other:
                seen_other["start"] = time.time()
            if row and row["state"] == "COMPLETED" and "end" not in seen_other:
                seen_other["end"] = time.time()
            if shown == count and "end" in seen_other:
                break
            if time.monotonic() - burst_ended > 300:
                raise SystemExit(f"only {shown} of {count} jobs shown after 300 s")
            time.sleep(0.05)
        all_shown = max(Job.objects.filter(slurm_job_id__in=ids).values_list("created_at", flat=True))
        print(
            f"{count} submitted at once: burst {burst_ended - burst_started:.1f} s; "
            f"the last one in the portal {all_shown.timestamp() - burst_ended_wall:.1f} s after the burst ended"
        )
        recorded = slurmctld_times(log_path, offset)
        for kind in ("start", "end"):
            source = recorded.get((kind, other_job))
            if source and kind in seen_other:
                print(f"  another user's job {kind}: shown {1000 * (seen_other[kind] - source):.0f} ms after slurmctld")

        cancel_started = time.monotonic()
        slurm_cancel_all(user)
        cancel_sent = time.monotonic()
        while Job.objects.filter(slurm_job_id__in=ids).exclude(state="CANCELLED").exists():
            if time.monotonic() - cancel_sent > 300:
                raise SystemExit("not every job shown cancelled after 300 s")
            time.sleep(0.05)
        print(
            f"{count} cancelled at once (scancel took {cancel_sent - cancel_started:.1f} s): "
            f"all shown CANCELLED {time.monotonic() - cancel_sent:.1f} s after scancel returned"
        )


def main():
    args = options(sizes="1000,5000", mass=5000)
    from django.conf import settings

    from cluster.clusters.services import rest_client

    log_path = Path(settings.DEVCLUSTER_DIR) / "root/var/log/slurm/slurmctld.log"
    with bench_database():
        user = make_user("mass")
        other = make_user("other")
        try:
            raw_client = rest_client()
            for size in (int(text) for text in args.sizes.split(",") if text):
                pass_costs(size, user, raw_client)
            if args.mass:
                mass_change(args.mass, user, other, log_path)
        finally:
            retire_user(user)
            retire_user(other)


if __name__ == "__main__":
    main()
