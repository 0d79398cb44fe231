"""Heatmap at scale: 10,000 GPUs against 100, in one run.

    .venv/bin/python bench/heatmap.py [--gpus 10000]

Prints, for both pool sizes: database queries per heatmap request (must not grow), the JSON
payload size, the server time, and the browser time to draw every cell in Debian's
Chromium (Playwright), as ratios. Then, at the large size: 100 viewers at once (threads, each
its own session, each refreshing every second, ten times the page's rate) for three cache
intervals: how many times the picture was built per interval, and the request p50/p95.
"""

import statistics
import threading
import time

from _common import bench_database, count_queries, make_user, options


def build_pool(gpus: int, prefix: str):
    from django.utils import timezone

    from cluster.models import Node
    from jobs.models import Job
    from telemetry.models import GpuLatest

    now = timezone.now()
    nodes, latest, jobs = [], [], []
    per_node = 8
    owner = make_user(f"{prefix}owner", provision=False)
    for n in range(gpus // per_node):
        name = f"{prefix}-{n:05d}"
        gpu_type = ("rtx4090", "a100", "h100")[n % 3]
        nodes.append(
            Node(name=name, state="MIXED", gpus=[{"type": gpu_type, "count": per_node, "used_indexes": [0, 1, 2, 3]}])
        )
        for index in range(per_node):
            latest.append(
                GpuLatest(
                    node=name,
                    index=index,
                    uuid=f"GPU-{name}-{index}",
                    time=now,
                    compute_util=(n * 7 + index * 13) % 100,
                    memory_util=(n * 3 + index * 29) % 100,
                    memory_used_mb=20000,
                    memory_total_mb=40960,
                    temperature_c=60,
                    power_w=250,
                    source="bench",
                )
            )
        jobs.append(Job(owner=owner, state="RUNNING", name=f"train-{n}", gpu_allocation={name: [0, 1, 2, 3]}))
    Node.objects.bulk_create(nodes, batch_size=2000)
    GpuLatest.objects.bulk_create(latest, batch_size=5000)
    Job.objects.bulk_create(jobs, batch_size=2000)


def clear_pool():
    from cluster.models import Node
    from jobs.models import Job
    from telemetry.models import GpuLatest

    GpuLatest.objects.all().delete()
    Node.objects.all().delete()
    Job.objects.all().delete()


def measure(admin, gpus: int, label: str) -> dict:
    from django.conf import settings
    from django.core.cache import caches
    from django.test import Client

    from console.heatmap import CACHE_KEY

    cache = caches[settings.HEATMAP_CACHE]
    clear_pool()
    build_pool(gpus, label)
    client = Client()
    client.force_login(admin)
    client.get("/console/heatmap.json")
    times, cached_times = [], []
    for _ in range(10):
        cache.delete(CACHE_KEY)  # a build: what one request per interval pays
        started = time.perf_counter()
        response = client.get("/console/heatmap.json")
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        client.get("/console/heatmap.json")  # the picture from the cache, cut for this viewer
        cached_times.append(time.perf_counter() - started)
    cache.delete(CACHE_KEY)
    with count_queries() as queries:
        response = client.get("/console/heatmap.json")
    body = response.content
    gzipped = client.get("/console/heatmap.json", HTTP_ACCEPT_ENCODING="gzip").content
    figures = {"queries": queries["queries"], "bytes": len(body), "server_ms": statistics.median(times) * 1000}
    figures["cached_ms"] = statistics.median(cached_times) * 1000
    figures["gzip_bytes"] = len(gzipped)
    figures["browser_ms"], figures["cells"] = browser_render(admin)
    print(
        f"{gpus} GPUs: queries={figures['queries']} payload={figures['bytes']} B "
        f"({figures['bytes'] / gpus:.1f} B/GPU, {figures['gzip_bytes']} B gzipped) "
        f"server p50={figures['server_ms']:.1f} ms building, {figures['cached_ms']:.1f} ms from the cache "
        f"browser draw={figures['browser_ms']:.0f} ms for {figures['cells']} cells"
    )
    return figures


def browser_render(admin) -> tuple[float, int]:
    """Time from navigation to every cell drawn, in Chromium against a real web process."""
    from playwright.sync_api import sync_playwright

    from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack

    with sync_playwright() as playwright, portal_stack() as base_url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{base_url}/accounts/login/")
        page.fill("input[name=login]", admin.username)
        page.fill("input[name=password]", "bench-" + admin.username)
        page.click("button[type=submit]")
        page.wait_for_url(f"{base_url}/")
        runs = []
        for _ in range(3):
            started = time.perf_counter()
            page.goto(f"{base_url}/console/heatmap/")
            page.wait_for_function("document.getElementById('heatmap').dataset.renderMs !== undefined")
            runs.append((time.perf_counter() - started) * 1000)
        cells = page.locator(".hm-cell").count()
        browser.close()
    return statistics.median(runs), cells


def viewers(admin, count: int, seconds: float, threads: int = 16) -> None:
    """`count` viewers, each refreshing every 10 s as the page does, for `seconds`, served by
    `threads` threads of this one process (a deployment has a web process per core); builds
    counted at the source."""
    from concurrent.futures import ThreadPoolExecutor

    from django.conf import settings
    from django.core.cache import caches
    from django.db import connection
    from django.test import Client

    from console import heatmap

    builds = []
    original = heatmap.build_shared_heatmap

    def counted():
        builds.append(time.monotonic())
        return original()

    heatmap.build_shared_heatmap = counted
    caches[settings.HEATMAP_CACHE].delete(heatmap.CACHE_KEY)
    users = [admin] + [make_user(f"viewer{n}", provision=False) for n in range(count - 1)]
    clients = []
    for user in users:
        client = Client()
        client.force_login(user)
        clients.append(client)
    times: list[float] = []
    lock = threading.Lock()
    period = 10.0  # static/js/heatmap.js REFRESH_MS

    def view(client, due):
        time.sleep(max(0.0, due - time.monotonic()))
        started = time.perf_counter()
        response = client.get("/console/heatmap.json")
        elapsed = time.perf_counter() - started
        assert response.status_code == 200, response.status_code
        with lock:
            times.append(elapsed)
        connection.close()  # a thread's connection must not outlive the run's database

    began = time.monotonic()
    # Each viewer's refreshes, spread over the period as real pages drift apart.
    schedule = sorted(
        (began + offset * period / count + round_ * period, client)
        for round_ in range(int(seconds / period))
        for offset, client in enumerate(clients)
    )
    with ThreadPoolExecutor(max_workers=threads) as pool:
        for future in [pool.submit(view, client, due) for due, client in schedule]:
            future.result()
    heatmap.build_shared_heatmap = original
    intervals = (time.monotonic() - began) / settings.HEATMAP_CACHE_SECONDS
    times.sort()
    print(
        f"{count} viewers for {seconds:.0f} s: {len(times)} requests, {len(builds)} builds "
        f"({len(builds) / intervals:.2f} per {settings.HEATMAP_CACHE_SECONDS} s interval), "
        f"request p50={times[len(times) // 2] * 1000:.0f} ms p95={times[int(len(times) * 0.95)] * 1000:.0f} ms"
    )


def main():
    args = options(gpus=10_000, viewers=100)

    with bench_database():
        admin = make_user("hmadmin", plan="enterprise", provision=False, role="admin")
        small = measure(admin, 96, "s")  # 12 nodes of 8: the nearest whole pool to 100 GPUs
        large = measure(admin, args.gpus, "l")
        viewers(admin, args.viewers, 30)
    print(f"RATIO queries ({args.gpus} / 96 GPUs): {large['queries'] / small['queries']:.2f}")
    print(f"RATIO payload bytes: {large['bytes'] / small['bytes']:.1f} for {args.gpus / 96:.0f}x the GPUs")
    print(f"RATIO server time: {large['server_ms'] / small['server_ms']:.1f}")
    print(f"RATIO browser time to draw: {large['browser_ms'] / small['browser_ms']:.1f}")


if __name__ == "__main__":
    main()
