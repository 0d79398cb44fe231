"""Job list API latency with 100,000 of a user's jobs against 100 jobs, as a ratio.

    .venv/bin/python bench/job_list_api.py [--jobs 100000] [--repeat 50]

Runs in-process (Django test client, no network) on PostgreSQL, so the figure is the
query and serialisation cost the API adds, not HTTP.
"""

import statistics
import time
from datetime import timedelta

from _common import bench_database, count_queries, describe, make_user, options


def main():
    args = options(jobs=100_000, repeat=50)

    from django.db import connection
    from django.test import Client
    from django.utils import timezone

    from jobs.models import Job

    with bench_database():
        small, large = make_user("small", provision=False), make_user("large", provision=False)
        now = timezone.now()

        def rows(owner, count):
            for index in range(count):
                yield Job(
                    owner=owner,
                    slurm_job_id=None,
                    name=f"job-{index}",
                    state="COMPLETED",
                    image="nvcr.io/nvidia/pytorch:24.05-py3",
                    gpu_type="a100",
                    tres_per_node="gres/gpu:a100:1",
                    spec={"image": "nvcr.io/nvidia/pytorch:24.05-py3", "command": "python train.py"},
                )

        started = time.perf_counter()
        Job.objects.bulk_create(rows(small, 100), batch_size=5000)
        Job.objects.bulk_create(rows(large, args.jobs), batch_size=5000)
        # Spread creation times as real history would be.
        with connection.cursor() as cursor:
            cursor.execute(
                "UPDATE jobs_job SET created_at = %s - (id * interval '1 second')", [now + timedelta(days=1)]
            )
            cursor.execute("ANALYZE jobs_job")
        print(f"inserted {args.jobs + 100} jobs in {time.perf_counter() - started:.1f} s")

        def measure(user, label):
            client = Client()
            client.force_login(user)
            client.get("/api/v1/jobs/")  # warm up
            first, deep = [], []
            cursor_url = "/api/v1/jobs/"
            for _ in range(args.repeat):
                t = time.perf_counter()
                response = client.get("/api/v1/jobs/")
                first.append(time.perf_counter() - t)
                assert response.status_code == 200 and len(response.json()["results"]) == 50
            # Walk 20 pages deep with the cursor and time each page.
            for _ in range(min(20, args.repeat)):
                t = time.perf_counter()
                body = client.get(cursor_url).json()
                deep.append(time.perf_counter() - t)
                cursor_url = body["next"] or "/api/v1/jobs/"
            with count_queries() as queries:
                client.get("/api/v1/jobs/")
            print(describe(f"{label} first page", first))
            print(describe(f"{label} cursor pages", deep))
            print(f"{label} queries per request: {queries['queries']}")
            return statistics.median(first), statistics.median(deep)

        small_first, small_deep = measure(small, "100 jobs")
        large_first, large_deep = measure(large, f"{args.jobs} jobs")
        print(f"RATIO first page ({args.jobs} jobs / 100 jobs): {large_first / small_first:.2f}")
        print(f"RATIO cursor pages ({args.jobs} jobs / 100 jobs): {large_deep / small_deep:.2f}")


if __name__ == "__main__":
    main()
