"""A cluster that goes away: how soon the portal says so, and whether the other cluster's pages
stay fast meanwhile.

    .venv/bin/python bench/cluster_stale.py [--rounds 5] [--jobs 200] [--requests 40]

The portal as `make dev` runs it (web process, worker, beat) with the other Slurm generation's dev
cluster as a further cluster ("site-b", cluster/clusters/registry.py) reached through a TCP path the
bench can cut (testing/tcp_forwarder.py). Each round cuts it, times the moment to
`/api/v1/clusters/` answering "stale" (the page banner reads the same row), then restores it
and times the moment to "up". Around the rounds, page 1 of the job list (a user of the
portal's own cluster with --jobs held jobs, 200 a page) is timed with site-b up and with it
cut, interleaved. On a throwaway PostgreSQL database; the jobs are cancelled at the end.
"""

import json
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

from _common import bench_database, make_user, options, percentile, retire_user
from mirror_passes import slurm_cancel_all, submit_held


def _state(session, base_url: str) -> str:
    rows = session.get(f"{base_url}/api/v1/clusters/", timeout=30).json()
    return next(row["state"] for row in rows if row["name"] == "site-b")


def _until(session, base_url: str, wanted: str, timeout: float = 60) -> float:
    started = time.monotonic()
    while _state(session, base_url) != wanted:
        if time.monotonic() - started > timeout:
            raise SystemExit(f"site-b not {wanted} after {timeout:.0f} s")
        time.sleep(0.1)
    return time.monotonic() - started


def _page_times(session, url: str, count: int) -> list[float]:
    times = []
    for _ in range(count):
        started = time.perf_counter()
        session.get(url, timeout=60).raise_for_status()
        times.append(time.perf_counter() - started)
    return times


def main():
    args = options(rounds=5, jobs=200, requests=(40, "job list requests per state and half"))

    import requests
    from django.conf import settings

    from accounts.models import ApiToken
    from cluster.clusters.services import rest_client, slurm_cli
    from cluster.management.commands.write_dev_clusters import dev_cluster_entries
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import Job
    from testing.servers import portal_stack
    from testing.tcp_forwarder import TcpForwarder

    entries = dev_cluster_entries(settings.DEVCLUSTER_RELEASES)
    if not entries:
        raise SystemExit("the other dev cluster generation is not built: make cluster-up")
    target = urlsplit(entries[0]["slurmrestd_url"])
    path = TcpForwarder(target.hostname, target.port)
    listen_port = path.port
    print(
        f"slurm {settings.SLURM_RELEASE} (the portal's own) and {entries[0]['name']} as site-b via port {listen_port}"
    )
    with bench_database(), tempfile.TemporaryDirectory() as folder:
        clusters_file = Path(folder) / "clusters.json"
        clusters_file.write_text(json.dumps([{**entries[0], "name": "site-b", "slurmrestd_url": path.url}]))
        user = make_user("stale")
        try:
            ids = submit_held(rest_client(user.profile.cluster_username), args.jobs)
            while Job.objects.filter(slurm_job_id__in=ids).count() < len(ids):
                mirror_jobs(rest_client(), queue=slurm_cli())
            _token, key = ApiToken.issue(user, "bench-stale")
            env = {"CLUSTERS_FILE": str(clusters_file)}
            with portal_stack(worker=True, beat=True, extra_env=env) as base_url, requests.Session() as session:
                session.headers["Authorization"] = f"Bearer {key}"
                list_url = f"{base_url}/api/v1/jobs/?page_size=200"
                _until(session, base_url, "up")
                _page_times(session, list_url, 3)  # warm
                pages = {"up": _page_times(session, list_url, args.requests)}
                to_stale, to_up = [], []
                for round_number in range(args.rounds):
                    path.stop()
                    to_stale.append(_until(session, base_url, "stale"))
                    if round_number == 0:
                        pages["stale"] = _page_times(session, list_url, args.requests)
                    path = TcpForwarder(target.hostname, target.port, listen_port=listen_port)
                    to_up.append(_until(session, base_url, "up"))
                pages["up"] += _page_times(session, list_url, args.requests)
                path.stop()
                _until(session, base_url, "stale")
                pages["stale"] += _page_times(session, list_url, args.requests)
        finally:
            path.stop()
            slurm_cancel_all(user)
            retire_user(user)
    interval = settings.CLUSTER_PROBE_INTERVAL_SECONDS
    print(
        f"site-b cut, {args.rounds} rounds (probe every {interval:g} s): shown stale after "
        f"{', '.join(f'{s:.1f}' for s in to_stale)} s; max {max(to_stale):.1f} s (goal <= 10 s)"
    )
    print(f"site-b back: shown up after {', '.join(f'{s:.1f}' for s in to_up)} s")
    for state, times in pages.items():
        print(
            f"job list page 1 ({args.jobs} jobs of the portal's own cluster), site-b {state:5s}: "
            f"p50 {statistics.median(times) * 1000:.1f} ms, p95 {percentile(times, 0.95) * 1000:.1f} ms "
            f"(n={len(times)})"
        )
    ratio = percentile(pages["stale"], 0.95) / percentile(pages["up"], 0.95)
    print(f"RATIO job list p95 with site-b stale / up = {ratio:.2f}")


if __name__ == "__main__":
    main()
