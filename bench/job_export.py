"""The whole job list in one request: GET /api/v1/jobs/export through the web process (as `make dev`
serves it), for a user with --jobs jobs, JSON lines and CSV.

    .venv/bin/python bench/job_export.py [--jobs 10000] [--repeat 5]

Prints the time to the first byte and to the last, the rows received and the bytes, p50 over
--repeat runs, and the ratio of the full export to one first page of /api/v1/jobs/ (200 jobs),
measured in the same run. On a throwaway PostgreSQL database.
"""

import statistics
import time

from _common import bench_database, make_user, options


def _timed(session, url: str) -> tuple[float, float, int, int]:
    started = time.perf_counter()
    first = None
    size = lines = 0
    with session.get(url, stream=True, timeout=120) as response:
        response.raise_for_status()
        for piece in response.iter_content(chunk_size=65536):
            if first is None:
                first = time.perf_counter() - started
            size += len(piece)
            lines += piece.count(b"\n")
    return first or 0.0, time.perf_counter() - started, lines, size


def main():
    args = options(jobs=10_000, repeat=5)

    import requests

    from accounts.models import ApiToken
    from jobs.models import Job
    from testing.servers import portal_stack

    with bench_database():
        owner = make_user("exporter", provision=False)
        Job.objects.bulk_create(
            (
                Job(owner=owner, cluster_user="exporter", name=f"job-{n}", state="COMPLETED", spec={},
                    image="nvcr.io/nvidia/pytorch:24.05-py3", gpu_type="a100", tres_per_node="gres/gpu:a100:1")
                for n in range(args.jobs)
            ),
            batch_size=2000,
        )  # fmt: skip
        _token, key = ApiToken.issue(owner, "bench")
        with portal_stack() as base_url, requests.Session() as session:
            session.headers["Authorization"] = f"Bearer {key}"
            figures = {}
            for label, path in (
                ("page 1 (200 jobs)", "/api/v1/jobs/?page_size=200"),
                ("export, JSON lines", "/api/v1/jobs/export"),
                ("export, CSV", "/api/v1/jobs/export?as=csv"),
            ):
                _timed(session, base_url + path)  # warm
                runs = [_timed(session, base_url + path) for _ in range(args.repeat)]
                figures[label] = runs
                first = statistics.median(run[0] for run in runs) * 1000
                total = statistics.median(run[1] for run in runs) * 1000
                print(
                    f"{label}: first byte {first:.0f} ms, all {total:.0f} ms, {runs[0][2]} lines, {runs[0][3]:,} bytes"
                )
    page = statistics.median(run[1] for run in figures["page 1 (200 jobs)"])
    whole = statistics.median(run[1] for run in figures["export, JSON lines"])
    print(f"{args.jobs} jobs exported in {whole:.2f} s = {whole / page:.1f}x one page of 200")


if __name__ == "__main__":
    main()
