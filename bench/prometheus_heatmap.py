"""The heatmap's data for 2,048 GPUs read from a real Prometheus (Debian's package) in one query.

256 nodes of 8 GPUs are served as DCGM exporters by this process (telemetry/exporter_server.py);
Prometheus scrapes each as its own target every 15 s, the portal's refresh; then the portal's
reader (telemetry/prometheus.py) runs its one aggregated query again and again: the time from the
request to the GPUs' samples (query, JSON, mapping), and with the store's write of them (what the
beat does every 15 s).
Goal: <= 500 ms for 2,048 GPUs.

    .venv/bin/python bench/prometheus_heatmap.py [--gpus 2048] [--reads 20]
"""

import random
import threading
import time
from datetime import UTC, datetime

from _common import bench_database, describe, options, percentile


def main() -> None:
    args = options(gpus=2048, reads=20)
    from telemetry import prometheus
    from telemetry.actions import storage
    from telemetry.exporter_server import exporter_server, scrape_config
    from telemetry.samples import GpuSample
    from testing.servers import prometheus_server

    per_node = 8
    nodes = [f"node-{number:04d}" for number in range((args.gpus + per_node - 1) // per_node)]
    rng = random.Random(3)

    now = datetime.now(UTC)
    by_node = {
        node: [
            GpuSample(now, node, index, f"GPU-{node}-{index}", rng.uniform(0, 100), rng.uniform(0, 100),
                      rng.randint(300, 80000), 81920, rng.uniform(30, 80), rng.uniform(60, 700))
            for index in range(per_node)
        ]
        for node in nodes
    }  # fmt: skip

    def samples_of(node: str) -> list[GpuSample]:
        return by_node.get(node, [])

    server = exporter_server(("127.0.0.1", 0), samples_of, models={}, driver="550.54.15")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    address = f"127.0.0.1:{server.server_address[1]}"
    expected = len(nodes) * per_node * 6
    with prometheus_server(scrape_config(nodes, address, interval="15s")) as url:
        started = time.monotonic()
        while (read := prometheus.read_prometheus(url, datetime.now(UTC))).series < expected:
            if time.monotonic() - started > 120:
                raise SystemExit(f"Prometheus holds {read.series} of {expected} series after 120 s")
            time.sleep(1)
        print(f"{len(read.samples)} GPUs on {len(nodes)} targets in Prometheus ({read.series} series)")
        reads, stored = [], []
        with bench_database():
            for _ in range(args.reads):
                began = time.perf_counter()
                read = prometheus.read_prometheus(url, datetime.now(UTC))
                reads.append(time.perf_counter() - began)
                storage.store_samples(read.samples, source="prometheus")
                stored.append(time.perf_counter() - began)
        assert len(read.samples) == len(nodes) * per_node, len(read.samples)
    server.shutdown()
    print(describe(f"one query, {len(read.samples)} GPUs' samples", reads))
    print(describe("the same and stored (the beat's read)", stored))
    print(f"goal: <= 500 ms; p95 of the query {percentile(reads, 0.95) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
