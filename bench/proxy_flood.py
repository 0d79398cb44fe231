"""One user's flood through the session proxy beside another user's job-socket connects.

    .venv/bin/python bench/proxy_flood.py [--clients 48] [--seconds 15]

One web process as `make dev` serves it (gpupool/serve.py) on a throwaway PostgreSQL database.
alice has a session (a stand-in Jupyter on 127.0.0.1 that echoes each request); bob opens the
job-status WebSocket (/ws/jobs/ with his session cookie), waits for it to be accepted, closes it,
and again, for `--seconds`:
1. alone;
2. beside `--clients` clients of alice's (another process) sending GET requests through her
   session's host name as fast as they can.
Prints bob's connect p50/p95 in each phase and their ratio (goal: p95 beside <= 2x alone), and
what alice's clients got (answered by her server, or 429 once past her pace). Before the proxy
had pools of its own and a pace, the same flood moved the p95 from 31 to 1,212 ms.
"""

import asyncio
import multiprocessing
import statistics
import time

from _common import bench_database, make_user, options, percentile


def _flood(port: int, host: str, cookie: str, clients: int, seconds: float, counts) -> None:
    import httpx

    async def client(session: httpx.AsyncClient, stop: float) -> dict:
        seen: dict[int, int] = {}
        while time.monotonic() < stop:
            try:
                status = (await session.get(f"http://127.0.0.1:{port}/api/echo", headers={"Host": host})).status_code
            except httpx.HTTPError:
                status = 0
            seen[status] = seen.get(status, 0) + 1
        return seen

    async def run():
        stop = time.monotonic() + seconds
        limits = httpx.Limits(max_connections=clients)
        async with httpx.AsyncClient(limits=limits, cookies={"gpupool_session": cookie}, timeout=30) as session:
            results = await asyncio.gather(*(client(session, stop) for _ in range(clients)))
        for seen in results:
            for status, number in seen.items():
                counts[status] = counts.get(status, 0) + number

    asyncio.run(run())


def _connects(base_url: str, cookie: str, seconds: float) -> list[float]:
    from websockets.sync.client import connect

    url = base_url.replace("http://", "ws://") + "/ws/jobs/"
    headers = {"Cookie": f"sessionid={cookie}", "Origin": base_url}
    took, stop = [], time.monotonic() + seconds
    while time.monotonic() < stop:
        started = time.perf_counter()
        with connect(url, additional_headers=headers, open_timeout=30):
            took.append(time.perf_counter() - started)
        time.sleep(0.02)
    return took


def main():
    args = options(clients=48, seconds=15.0)

    from django.test import Client

    from interactive import origins
    from interactive.tests.upstream import session_on, upstream_server
    from testing.servers import portal_processes

    with bench_database(), upstream_server() as (http_port, _ws, _server):
        alice = make_user("alice", provision=False)
        bob = make_user("bob", provision=False)
        session = session_on(alice, port=http_port)
        alice_cookie = origins.cookie_value(session.pk, alice)
        browser = Client()
        browser.force_login(bob)
        bob_cookie = browser.cookies["sessionid"].value
        with portal_processes() as (base_url, _pid):
            port = int(base_url.rsplit(":", 1)[1])
            _connects(base_url, bob_cookie, 1)  # warm: threads, connections
            alone = _connects(base_url, bob_cookie, args.seconds)
            manager = multiprocessing.Manager()
            counts = manager.dict()
            flood = multiprocessing.get_context("spawn").Process(
                target=_flood,
                args=(
                    port,
                    origins.session_host(session.host_key),
                    alice_cookie,
                    args.clients,
                    args.seconds + 2,
                    counts,
                ),
            )
            flood.start()
            time.sleep(1.5)  # the flood at full pace
            beside = _connects(base_url, bob_cookie, args.seconds)
            flood.join()
            seen = dict(counts)

    def figures(label, values):
        ms = [value * 1000 for value in values]
        return f"{label}: {len(ms)} connects, p50 {statistics.median(ms):.1f} ms, p95 {percentile(ms, 0.95):.1f} ms"

    print(figures("bob's socket connects alone", alone))
    print(figures(f"beside alice's {args.clients} clients", beside))
    total = sum(seen.values())
    print(
        f"alice's clients: {total} requests in {args.seconds + 2:.0f} s ({total / (args.seconds + 2):.0f}/s): "
        + ", ".join(f"{status or 'failed'}: {number}" for status, number in sorted(seen.items()))
    )
    print(f"p95 beside / alone = {percentile(beside, 0.95) / percentile(alone, 0.95):.2f} (goal <= 2)")


if __name__ == "__main__":
    main()
