"""Fast reads beside slow requests, through the web process: does one slow request stall the others?

    .venv/bin/python bench/http_concurrency.py [--readers 8] [--slow 4] [--seconds 15]

Two phases in one run against one portal process (as `make dev` serves it) on a
throwaway PostgreSQL database:
1. `--readers` clients read `/api/v1/jobs/?page_size=20` (a user with 40 jobs) as fast as
   they can, alone;
2. the same readers beside `--slow` clients that fail sign-ins (a wrong password: a full
   password hash each, ~0.3-0.5 s of CPU) as fast as they can.
Prints each phase's p50/p95 and reads per second, and the ratios (goal: p95 beside the slow
clients <= 2x p95 alone, throughput >= 0.5x). The sign-in limit is raised for the run, so
every failed sign-in costs its hash.
"""

import os
import re
import secrets
import statistics
import threading
import time

from _common import bench_database, make_user, options, percentile


def _reader(base_url: str, key: str, stop: threading.Event, latencies: list, errors: list) -> None:
    import requests

    with requests.Session() as session:
        session.headers["Authorization"] = f"Bearer {key}"
        while not stop.is_set():
            started = time.perf_counter()
            response = session.get(f"{base_url}/api/v1/jobs/", params={"page_size": 20}, timeout=60)
            elapsed = time.perf_counter() - started
            if response.status_code == 200 and len(response.json()["results"]) == 20:
                latencies.append(elapsed)
            else:
                errors.append(response.status_code)


def _failing_sign_in(base_url: str, stop: threading.Event, done: list) -> None:
    import requests

    with requests.Session() as session:
        while not stop.is_set():
            # A name of its own each time, so no per-name limit answers before the hash does
            # (Django hashes the password for an unknown name too).
            username = f"guess-{secrets.token_hex(4)}"
            page = session.get(f"{base_url}/accounts/login/", timeout=60).text
            token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
            started = time.perf_counter()
            response = session.post(
                f"{base_url}/accounts/login/",
                data={"csrfmiddlewaretoken": token, "login": username, "password": "not-the-password"},
                headers={"Referer": f"{base_url}/accounts/login/"},
                timeout=60,
            )
            if response.status_code != 200:
                raise RuntimeError(f"a failed sign-in answered {response.status_code}, not the form again")
            done.append(time.perf_counter() - started)


def _phase(base_url: str, key: str, readers: int, slow: int, seconds: float) -> dict:
    stop = threading.Event()
    latencies, errors, sign_ins = [], [], []
    threads = [threading.Thread(target=_reader, args=(base_url, key, stop, latencies, errors)) for _ in range(readers)]
    threads += [threading.Thread(target=_failing_sign_in, args=(base_url, stop, sign_ins)) for _ in range(slow)]
    for thread in threads:
        thread.start()
    time.sleep(1)  # warm up: threads, connections, the first hashes
    latencies.clear()
    sign_ins.clear()
    started = time.perf_counter()
    time.sleep(seconds)
    measured = list(latencies)
    wall = time.perf_counter() - started
    hashes = len(sign_ins)
    stop.set()
    for thread in threads:
        thread.join(timeout=120)
    if errors:
        raise RuntimeError(f"reads failed: {errors[:5]}")
    ms = [value * 1000 for value in measured]
    return {
        "reads": len(ms),
        "per_second": len(ms) / wall,
        "p50": statistics.median(ms),
        "p95": percentile(ms, 0.95),
        "sign_ins_per_second": hashes / wall,
    }


def main():
    args = options(readers=8, slow=4, seconds=15.0)

    from accounts.models import ApiToken
    from jobs.models import Job
    from testing.servers import portal_stack

    with bench_database():
        reader = make_user("reader", provision=False)
        Job.objects.bulk_create(
            Job(owner=reader, name=f"job-{n}", state="COMPLETED", image="nvcr.io/nvidia/pytorch:24.05-py3")
            for n in range(40)
        )
        _token, key = ApiToken.issue(reader, "bench")
        extra_env = {
            "SIGN_IN_ATTEMPTS_PER_MINUTE": "100000",
            "SIGN_IN_FAILURES_PER_MINUTE": "100000",
            "HTTP_THREADS": os.environ.get("HTTP_THREADS", "16"),
        }
        with portal_stack(extra_env=extra_env) as base_url:
            alone = _phase(base_url, key, args.readers, 0, args.seconds)
            beside = _phase(base_url, key, args.readers, args.slow, args.seconds)
    for label, figures in (("alone", alone), (f"beside {args.slow} failing sign-ins", beside)):
        print(
            f"{args.readers} readers {label}: {figures['reads']} reads, {figures['per_second']:.1f}/s, "
            f"p50 {figures['p50']:.1f} ms, p95 {figures['p95']:.1f} ms"
            + (f"; {figures['sign_ins_per_second']:.1f} failed sign-ins/s" if label != "alone" else "")
        )
    print(
        f"p95 beside / alone = {beside['p95'] / alone['p95']:.2f} (goal <= 2); "
        f"throughput beside / alone = {beside['per_second'] / alone['per_second']:.2f} (goal >= 0.5)"
    )


if __name__ == "__main__":
    main()
