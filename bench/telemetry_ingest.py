"""Can ingest keep up with 10,000 GPUs sampled every 10 s (1,000 samples/s) on this machine?

    .venv/bin/python bench/telemetry_ingest.py [--gpus 10000] [--seconds 20] [--clients 8]

Each of gpus/8 nodes has its own token and posts 8-GPU batches over HTTP to a real web process
(as agents do), from --clients concurrent senders for --seconds. Prints samples stored per
second and the ratio to the 1,000/s that 10,000 GPUs every 10 s need; then the same for
the storage layer alone (batches of 800, as an aggregator or DCGM scraper sends).
"""

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import threading
import time
from datetime import UTC, datetime

from _common import bench_database


def batch(node: str, moment: datetime, per_node: int) -> dict:
    return {
        "node": node,
        "agent": "bench",
        "samples": [
            {
                "time": moment.isoformat(),
                "index": index,
                "uuid": f"GPU-{node}-{index}",
                "compute_util": 55.0,
                "memory_util": 30.0,
                "memory_used_mb": 20000,
                "memory_total_mb": 40960,
                "temperature_c": 61.0,
                "power_w": 250.0,
            }
            for index in range(per_node)
        ],
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--gpus", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument(
        "--load",
        choices=["wrk", "python"],
        default="wrk" if shutil.which("wrk") else "python",
        help="wrk (C, light on this machine's 2 cores) or Python threads with requests",
    )
    args = parser.parse_args()
    per_node = 8
    nodes = args.gpus // per_node
    need = args.gpus / 10.0

    import requests

    from telemetry.models import GpuSampleRaw, NodeToken
    from testing.servers import portal_stack

    with bench_database():
        tokens = {f"bn-{n:05d}": NodeToken.issue(f"bn-{n:05d}") for n in range(nodes)}
        names = list(tokens)
        stored = [0] * args.clients
        failures = [0] * args.clients
        with portal_stack() as base_url:
            url = f"{base_url}/api/v1/telemetry/ingest"
            if args.load == "wrk":
                http_rate, failed = wrk_load(url, tokens, per_node, args)
                print(
                    f"HTTP ingest (wrk, {args.clients} connections, one web process): "
                    f"{http_rate:.0f} samples/s, {failed} non-202"
                )
                print(
                    f"RATIO HTTP ingest / needed ({need:.0f} samples/s for {args.gpus} GPUs every 10 s): "
                    f"{http_rate / need:.2f}"
                )
                print(f"raw rows stored: {GpuSampleRaw.objects.count()}")
                storage_only(args, per_node, need)
                return
            deadline = time.monotonic() + args.seconds

            def sender(slot: int):
                session = requests.Session()
                position = slot
                while time.monotonic() < deadline:
                    node = names[position % nodes]
                    position += args.clients
                    response = session.post(
                        url,
                        json=batch(node, datetime.now(UTC), per_node),
                        headers={"Authorization": f"Bearer {tokens[node]}"},
                        timeout=30,
                    )
                    if response.status_code == 202:
                        stored[slot] += response.json()["accepted"]
                    else:
                        failures[slot] += 1

            threads = [threading.Thread(target=sender, args=(slot,)) for slot in range(args.clients)]
            started = time.monotonic()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            elapsed = time.monotonic() - started
        http_rate = sum(stored) / elapsed
        print(
            f"HTTP ingest: {sum(stored)} samples in {elapsed:.1f} s = {http_rate:.0f} samples/s "
            f"({http_rate / per_node:.0f} batches/s, {sum(failures)} failed) with {args.clients} senders, "
            "one web process"
        )
        print(
            f"RATIO HTTP ingest / needed ({need:.0f} samples/s for {args.gpus} GPUs every 10 s): {http_rate / need:.2f}"
        )
        print(f"raw rows stored: {GpuSampleRaw.objects.count()}")
        storage_only(args, per_node, need)


def wrk_load(url: str, tokens: dict, per_node: int, args) -> tuple[float, int]:
    """Drive the endpoint with wrk; every request is one node's batch with that node's token."""
    moment = datetime.now(UTC)
    lines = ["local requests = {}"]
    for i, (node, token) in enumerate(tokens.items()):
        body = json.dumps(batch(node, moment, per_node)).replace("\\", "\\\\").replace("'", "\\'")
        lines.append(f"requests[{i + 1}] = {{'{token}', '{body}'}}")
    lines.append(f"local count = {len(tokens)}")
    lines.append(
        """
local i = 0
request = function()
  i = i % count + 1
  local entry = requests[i]
  local headers = {["Authorization"] = "Bearer " .. entry[1], ["Content-Type"] = "application/json"}
  return wrk.format("POST", nil, headers, entry[2])
end
local failures = 0
response = function(status, headers, body)
  if status ~= 202 then failures = failures + 1 end
end
done = function(summary, latency, requests)
  io.write(string.format("WRK requests=%d seconds=%f p50=%d p99=%d\\n", summary.requests, summary.duration / 1e6,
    latency:percentile(50), latency:percentile(99)))
end
"""
    )
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write("\n".join(lines))
    completed = subprocess.run(
        ["wrk", "-t", "2", "-c", str(args.clients), "-d", f"{int(args.seconds)}s", "-s", script.name, url],
        capture_output=True,
        text=True,
        timeout=args.seconds + 60,
    )
    os.unlink(script.name)
    print(completed.stdout.strip().splitlines()[-1] if completed.stdout else completed.stderr)
    from telemetry.models import GpuSampleRaw

    stored = GpuSampleRaw.objects.count()
    statuses = [line for line in completed.stdout.splitlines() if "Non-2xx" in line]
    failed = int(statuses[0].split()[-1]) if statuses else 0
    return stored / args.seconds, failed


def storage_only(args, per_node: int, need: float) -> None:
    from telemetry.actions.storage import store_samples
    from telemetry.samples import GpuSample

    moment = datetime.now(UTC)
    samples = [
        GpuSample(moment, f"bn-{n:05d}", index, f"GPU-{n}-{index}", 55.0, 30.0, 20000, 40960, 61.0, 250.0)
        for n in range(100)
        for index in range(per_node)
    ]
    started = time.monotonic()
    rounds = 0
    while time.monotonic() - started < args.seconds / 2:
        store_samples(samples, source="bench")
        rounds += 1
    rate = rounds * len(samples) / (time.monotonic() - started)
    print(f"storage alone (batches of {len(samples)}): {rate:.0f} samples/s")
    print(f"RATIO storage / needed: {rate / need:.1f}")


if __name__ == "__main__":
    main()
