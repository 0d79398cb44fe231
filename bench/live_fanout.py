"""Live status at scale: many users, many open pages each, through the production shape.

    .venv/bin/python bench/live_fanout.py [--users 10] [--pages 100] [--jobs 10000]
        [--rate 20] [--seconds 10] [--burst 200]

deploy/local-production.sh's shape (nginx with TLS in front of two web processes, Redis and
PostgreSQL of its own, workers and beat), brought up by this script. `--users` users with
`--jobs` queued jobs among them; each user opens `--pages` job pages (the job-status WebSocket,
/ws/jobs/, through nginx over TLS, with the user's session cookie), all at once. Then:
1. steady: `--rate` job changes a second for `--seconds` (each a job of a user picked in turn,
   published as the mirror publishes one: jobs.live.events.publish_job_update);
2. burst: `--burst` jobs change at once (one mass change: publish_job_updates).
Each change must reach every job-list page of its owner, or with `--job-pages` (each page a
job's own page, as a user's many tabs are) every page of that job. Prints the time to connect every page, and for
each phase the delay from publishing to a page hearing it (p50, p95, max) and how many of the
expected deliveries arrived. Goal (issue: 1,000 pages on this 2-core machine): every page
connected within 5 s; p95 delay within 500 ms.

The pages are this script's own asyncio clients (uvloop, one process): they share the two cores
with nginx, both web processes and Redis, and their own cost is in the figures.
"""

import argparse
import asyncio
import os
import ssl
import statistics
import sys
import time
from pathlib import Path

BASE_DIR = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(BASE_DIR / "bench"))
RUN = Path(os.environ.get("LOCAL_PRODUCTION_DIR", BASE_DIR / "var" / "production")).resolve()


def _load_production_env() -> None:
    for line in (RUN / "production.env").read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            name, value = line.split("=", 1)
            os.environ[name] = value


class Pages:
    """The open pages: each a socket whose messages are matched against what was published."""

    def __init__(self):
        self.published: dict[int, float] = {}
        self.delays: list[float] = []
        self.connected = 0
        self.connect_times: list[float] = []
        self.failures: list[str] = []

    async def page(self, url: str, cookie: str, origin: str, context, gate: asyncio.Semaphore, ready):
        from websockets.asyncio.client import connect

        async with gate:
            started = time.perf_counter()
            try:
                socket = await connect(
                    url,
                    additional_headers={"Cookie": f"sessionid={cookie}", "Origin": origin},
                    ssl=context,
                    open_timeout=60,
                    ping_interval=None,
                    compression=None,
                )
            except Exception as exc:  # counted and shown, not raised: one page's failure is a figure
                self.failures.append(f"{type(exc).__name__}: {exc}")
                ready()
                return
            self.connect_times.append(time.perf_counter() - started)
            self.connected += 1
            ready()
        import json

        try:
            async for raw in socket:
                now = time.perf_counter()
                message = json.loads(raw)
                for job in message.get("jobs") or [message.get("job") or {}]:
                    published = self.published.get(job.get("id"))
                    if published is not None:
                        self.delays.append(now - published)
        except Exception:
            pass


def _describe(label: str, delays: list[float], expected: int) -> str:
    from _common import percentile

    if not delays:
        return f"{label}: nothing arrived of {expected}"
    ms = [value * 1000 for value in delays]
    return (
        f"{label}: {len(ms)} of {expected} deliveries, p50 {statistics.median(ms):.0f} ms, "
        f"p95 {percentile(ms, 0.95):.0f} ms, max {max(ms):.0f} ms"
    )


async def _run(args, cookies: list[str], jobs_by_user: list[list[int]], base: str) -> list[str]:
    from jobs.live.events import publish_job_update, publish_job_updates

    context = ssl.create_default_context(cafile=str(RUN / "tls" / "cert.pem"))
    url = base.replace("https://", "wss://") + "/ws/jobs/?batches=1"  # as the portal's pages ask
    pages = Pages()
    total = len(cookies) * args.pages
    all_ready = asyncio.Event()
    count = 0

    def ready():
        nonlocal count
        count += 1
        if count == total:
            all_ready.set()

    gate = asyncio.Semaphore(args.connecting)
    started = time.perf_counter()
    # A list page hears all of its user's jobs; a job page (--job-pages) its own job alone.
    watching: dict[int, int] = {}
    tasks = []
    for number in range(args.pages):
        for cookie, jobs in zip(cookies, jobs_by_user, strict=True):
            page_url = url
            if args.job_pages:
                job_id = jobs[number % len(jobs)]
                watching[job_id] = watching.get(job_id, 0) + 1
                page_url = f"{url}&job={job_id}"
            tasks.append(asyncio.ensure_future(pages.page(page_url, cookie, base, context, gate, ready)))
    await asyncio.wait_for(all_ready.wait(), 120)
    connect_wall = time.perf_counter() - started
    lines = [
        f"{pages.connected} of {total} pages connected in {connect_wall:.2f} s "
        f"({args.connecting} at a time; goal < 5 s); per page p95 "
        f"{sorted(pages.connect_times)[int(0.95 * (len(pages.connect_times) - 1))] * 1000:.0f} ms"
        + (f"; failures: {pages.failures[:3]}" if pages.failures else "")
    ]
    await asyncio.sleep(2)  # each page's connect work (its pending jobs watched) done
    loop = asyncio.get_running_loop()
    # What changes: in --job-pages, jobs some page shows (the others reach no page at all).
    pending = [[job for job in jobs if not args.job_pages or job in watching] for jobs in jobs_by_user]

    def reach(job_id: int) -> int:
        return watching.get(job_id, 0) if args.job_pages else args.pages

    # 1. Steady: one change every 1/rate s, users in turn.
    pages.delays = []
    changes, expected = int(args.rate * args.seconds), 0
    for index in range(changes):
        job_id = pending[index % len(pending)].pop()
        expected += reach(job_id)
        pages.published[job_id] = time.perf_counter()
        await loop.run_in_executor(None, publish_job_update, job_id)
        await asyncio.sleep(1 / args.rate)
    await asyncio.sleep(3)
    lines.append(_describe(f"steady, {args.rate}/s for {args.seconds:.0f} s", pages.delays, expected))

    # 2. Burst: one mass change of --burst jobs spread over the users.
    pages.delays = []
    burst = [pending[index % len(pending)].pop() for index in range(args.burst)]
    now = time.perf_counter()
    for job_id in burst:
        pages.published[job_id] = now
    await loop.run_in_executor(None, publish_job_updates, burst)
    await asyncio.sleep(5)
    lines.append(_describe(f"burst of {args.burst} at once", pages.delays, sum(reach(job) for job in burst)))
    for task in tasks:
        task.cancel()
    return lines


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--pages", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=20)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--burst", type=int, default=200)
    parser.add_argument("--connecting", type=int, default=200, help="pages opening at the same moment")
    parser.add_argument("--keep", action="store_true", help="leave the production shape running")
    parser.add_argument(
        "--job-pages", action="store_true", help="each page a job's own page (/ws/jobs/?job=<id>), not the job list"
    )
    args = parser.parse_args()

    from fault_rehearsal import lp

    print("bringing up the production shape (deploy/local-production.sh up)...", flush=True)
    lp("up")
    _load_production_env()
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    import uvloop
    from _common import make_user, signed_in_session  # sets Django up, on the production shape's database

    from jobs.models import Job

    tag = time.strftime("%H%M%S")
    users = [make_user(f"fan{tag}u{index}", provision=False) for index in range(args.users)]
    per_user = args.jobs // args.users
    Job.objects.bulk_create(
        Job(owner=user, name=f"queued-{n}", state="PENDING", image="nvcr.io/nvidia/pytorch:24.05-py3")
        for user in users
        for n in range(per_user)
    )
    jobs_by_user = [list(Job.objects.filter(owner=user).values_list("pk", flat=True)) for user in users]
    base = f"https://127.0.0.1:{os.environ.get('HTTPS_PORT', '28443')}"
    try:
        lines = uvloop.run(_run(args, [signed_in_session(user) for user in users], jobs_by_user, base))
    finally:
        Job.objects.filter(owner__in=users).delete()
        if not args.keep:
            lp("down")
    kind = "job pages" if args.job_pages else "job-list pages"
    print(f"{args.users} users x {args.pages} {kind}, {per_user * args.users} queued jobs, two web processes, nginx:")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
