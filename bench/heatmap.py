"""Heatmap at scale: 10,000 GPUs against 100, in one run.

    .venv/bin/python bench/heatmap.py [--gpus 10000]

Prints, for both pool sizes: database queries per heatmap request (must not grow), the JSON
payload size, the server time, and the browser time to draw every cell in Debian's
Chromium (Playwright), as ratios.
"""

import argparse
import statistics
import time

from _common import bench_database, count_queries, make_user


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
    from django.test import Client

    clear_pool()
    build_pool(gpus, label)
    client = Client()
    client.force_login(admin)
    client.get("/console/heatmap.json")
    times = []
    for _ in range(10):
        started = time.perf_counter()
        response = client.get("/console/heatmap.json")
        times.append(time.perf_counter() - started)
    with count_queries() as queries:
        response = client.get("/console/heatmap.json")
    body = response.content
    gzipped = client.get("/console/heatmap.json", HTTP_ACCEPT_ENCODING="gzip").content
    figures = {"queries": queries["queries"], "bytes": len(body), "server_ms": statistics.median(times) * 1000}
    figures["gzip_bytes"] = len(gzipped)
    figures["browser_ms"], figures["cells"] = browser_render(admin)
    print(
        f"{gpus} GPUs: queries={figures['queries']} payload={figures['bytes']} B "
        f"({figures['bytes'] / gpus:.1f} B/GPU, {figures['gzip_bytes']} B gzipped) "
        f"server p50={figures['server_ms']:.1f} ms "
        f"browser draw={figures['browser_ms']:.0f} ms for {figures['cells']} cells"
    )
    return figures


def browser_render(admin) -> tuple[float, int]:
    """Time from navigation to every cell drawn, in Chromium against a real Daphne."""
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


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=10_000)
    args = parser.parse_args()
    with bench_database():
        admin = make_user("hmadmin", plan="enterprise", provision=False)
        admin.profile.role = "admin"
        admin.profile.save()
        small = measure(admin, 96, "s")  # 12 nodes of 8: the nearest whole pool to 100 GPUs
        large = measure(admin, args.gpus, "l")
    print(f"RATIO queries ({args.gpus} / 96 GPUs): {large['queries'] / small['queries']:.2f}")
    print(f"RATIO payload bytes: {large['bytes'] / small['bytes']:.1f} for {args.gpus / 96:.0f}x the GPUs")
    print(f"RATIO server time: {large['server_ms'] / small['server_ms']:.1f}")
    print(f"RATIO browser time to draw: {large['browser_ms'] / small['browser_ms']:.1f}")


if __name__ == "__main__":
    main()
