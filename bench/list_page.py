"""Page 1 of the job list against the peer's cached answer and a raw `GET /jobs`, side by side.

    .venv/bin/python bench/list_page.py [--sizes 1000,5000] [--repeat 20]

For each size, one user's held jobs are submitted to the real dev cluster and mirrored; then, in
one run, interleaved: page 1 of `GET /api/v1/jobs/` (--page-size jobs, 200 by default, through the web process, with a
token) and Slurm-web 6.0's agent answering `jobs` from its Redis cache (bench/peer/, when
bench/peer/setup.sh has installed it: a warm-up request fills the cache, the timed ones read it
well within its 30 s); before them, three raw `GET /jobs` from slurmrestd. Prints p50 and p95
of each, and the ratios of medians. On a throwaway PostgreSQL database; the jobs are cancelled
at the end.
"""

import statistics
import sys
import time
from contextlib import ExitStack
from pathlib import Path

from _common import bench_database, make_user, options, percentile, retire_user
from mirror_passes import slurm_cancel_all, submit_held


def _timed(session, url: str, **kwargs) -> tuple[float, int]:
    started = time.perf_counter()
    response = session.get(url, timeout=300, **kwargs)
    response.raise_for_status()
    return time.perf_counter() - started, len(response.content)


def _peer(release: str):
    """Slurm-web's agent, or None where it is not installed (bench/peer/README.md)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent / "peer"))
    try:
        from slurmweb_agent import PeerAgentError, running_agent
    except ImportError:
        return None
    try:
        return running_agent(release)
    except PeerAgentError as missing:
        print(f"peer not run: {missing}")
        return None


def measure(size: int, user, repeat: int, peer, page_size: int) -> None:
    import requests

    from accounts.models import ApiToken
    from cluster.clusters.services import rest_client, slurm_cli
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import Job
    from testing.servers import portal_stack

    slurm = rest_client(user.profile.cluster_username)
    ids = submit_held(slurm, size)
    service = rest_client()
    while Job.objects.filter(slurm_job_id__in=ids).count() < size:
        mirror_jobs(service, queue=slurm_cli())
    _token, key = ApiToken.issue(user, f"bench-{size}")
    timings: dict[str, list[float]] = {"portal page 1": [], "peer cached": [], "raw GET /jobs": []}
    sizes: dict[str, int] = {}
    with ExitStack() as stack:
        base_url = stack.enter_context(portal_stack())
        session = stack.enter_context(requests.Session())
        session.headers["Authorization"] = f"Bearer {key}"
        peer_url, peer_headers = stack.enter_context(peer) if peer is not None else (None, None)
        page_url = f"{base_url}/api/v1/jobs/?page_size={page_size}"
        service.timeout = 300  # the whole list takes seconds at thousands
        for _ in range(3):  # seconds each, and it grows slurmrestd: a few are enough
            started = time.perf_counter()
            service._request("GET", service.adapter.slurm_path("jobs"))
            timings["raw GET /jobs"].append(time.perf_counter() - started)
        _timed(session, page_url)  # warm: the first request of a process imports and connects
        if peer_url:
            # Fills the peer's cache (30 s for jobs): the rounds below take a few seconds.
            _timed(requests, peer_url, headers=peer_headers)
        for _ in range(repeat):
            seconds, sizes["portal page 1"] = _timed(session, page_url)
            timings["portal page 1"].append(seconds)
            if peer_url:
                seconds, sizes["peer cached"] = _timed(requests, peer_url, headers=peer_headers)
                timings["peer cached"].append(seconds)
    print(f"{size} of the user's jobs queued, page 1 of {page_size} ({repeat} rounds, interleaved):")
    medians = {}
    for label, values in timings.items():
        if not values:
            continue
        medians[label] = statistics.median(values)
        size_text = f", {sizes[label]:,} bytes" if label in sizes else ""
        print(
            f"  {label:14s} p50 {medians[label] * 1000:7.1f} ms, p95 {percentile(values, 0.95) * 1000:7.1f} ms"
            f" (n={len(values)}{size_text})"
        )
    page = medians["portal page 1"]
    print(f"  RATIO page 1 / raw GET /jobs {page / medians['raw GET /jobs']:.3f}")
    if "peer cached" in medians:
        print(f"  RATIO page 1 / peer's cached answer {page / medians['peer cached']:.2f} (goal <= 1)")
    slurm_cancel_all(user)


def main():
    args = options(
        sizes="1000,5000",
        repeat=20,
        page_size=(200, "jobs on page 1 (the API's default is 50)"),
        no_peer=(False, "leave Slurm-web's agent out"),
    )
    from django.conf import settings

    print(f"slurm {settings.SLURM_RELEASE}")
    with bench_database():
        user = make_user("lister")
        try:
            for size in (int(text) for text in args.sizes.split(",") if text):
                peer = None if args.no_peer else _peer(settings.SLURM_RELEASE)
                measure(size, user, args.repeat, peer, args.page_size)
        finally:
            retire_user(user)


if __name__ == "__main__":
    main()
