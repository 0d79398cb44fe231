"""A 10,000-point sweep against the real dev cluster, in one run:

1. accepted (10,000 task rows) and submitted (10 arrays of MaxArraySize 1001, each after the one
   before, one directory per task): seconds for each;
2. mirrored for a while as the beat does (a pass every 2 s) while tasks start and end: each
   pass's time and requests to slurmrestd, and how stale the portal's rows were (from the second
   Slurm says a task started or ended to the pass that wrote it);
3. every task cancelled at once: seconds until the portal shows all 10,000 ended.

    .venv/bin/python bench/sweeps.py [--points 10000] [--watch 60]
    BENCH_PROFILE=1 ...   # also a cProfile of one mirror pass at that size

Leaves the cluster as it found it (the user's jobs cancelled, the account removed).
"""

import os
import statistics
import time
from contextlib import ExitStack

from _common import bench_database, make_user, options, percentile, retire_user, wait_for_slurm_room
from mirror_passes import Counting


def main() -> None:
    args = options(
        points=10_000,
        watch=(60.0, "seconds of mirror passes while tasks run"),
        events=(False, "watch through the real stack (web process, worker, beat, Slurm's job events)"),
    )
    with bench_database():
        user = make_user("sweeper")
        try:
            run(user, args.points, args.watch, events=args.events)
        finally:
            retire_user(user)


def run(user, points: int, watch: float, *, events: bool = False) -> None:
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from plans.catalog import plan_for
    from sweeps.parameters import parse_sweep_parameters

    spec = parse_job_spec(
        {
            "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "gpu_type": "a100",
            "gpu_memory_gb": 5,
            "command": "sleep 3",
            "time_limit_minutes": 5,
        },
        plan=plan_for(user),
        policy=SpecPolicy.from_settings(),
    )
    grid = parse_sweep_parameters({"parameters": {"i": {"range": [0, points - 1, 1]}}}, max_points=points)
    wait_for_slurm_room(points)
    with ExitStack() as stack:
        if events:
            # The portal as it runs from the submission on (the beat's passes and slurmctld's
            # events; this process only looks): started later, it would first take the events
            # spooled meanwhile, and the watch would measure that backlog.
            from testing.servers import portal_stack

            stack.enter_context(portal_stack(worker=True, beat=True, port=8000))
        _submit_and_watch(user, spec, grid, points, watch, events=events)


def _submit_and_watch(user, spec, grid, points: int, watch: float, *, events: bool) -> None:
    from django.utils import timezone

    from cluster.clusters.services import rest_client
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import FINAL_STATES, Job
    from sweeps import actions
    from sweeps.submit import submit_sweep_arrays

    started = time.perf_counter()
    sweep = actions.create_sweep(user, spec, grid, name="bench", throttle=16)
    accepted = time.perf_counter() - started
    started = time.perf_counter()
    if events:
        # The portal's worker submits it (create_sweep queued the task), as it would for a user.
        while sweep.arrays.filter(slurm_array_job_id__isnull=True).exists() and time.perf_counter() - started < 300:
            time.sleep(0.1)
    else:
        submit_sweep_arrays.run(sweep.pk)
    submitted = time.perf_counter() - started
    arrays = list(sweep.arrays.order_by("offset"))
    assert all(array.slurm_array_job_id for array in arrays), [array.error_detail for array in arrays]
    print(f"{points} points: accepted in {accepted:.2f} s, {len(arrays)} arrays submitted in {submitted:.2f} s")

    pages(user, sweep)
    service = rest_client()
    if os.environ.get("BENCH_PROFILE"):
        import cProfile
        import pstats

        for _ in range(3):
            mirror_jobs(service)
            time.sleep(1)
        profile = cProfile.Profile()
        profile.runcall(mirror_jobs, service)
        pstats.Stats(profile).sort_stats("cumulative").print_stats(25)
    counter = Counting(service)
    seen: dict[tuple[int, str], float] = {}
    durations, requests = [], []

    def look() -> None:
        now = timezone.now()
        for pk, state in (
            Job.objects.filter(sweep=sweep).exclude(state__in=("PENDING", "SUBMITTING")).values_list("pk", "state")
        ):
            seen.setdefault((pk, "RUNNING"), now.timestamp())
            if state in FINAL_STATES:
                seen.setdefault((pk, "ENDED"), now.timestamp())

    deadline = time.monotonic() + watch
    watch_started = time.time()
    while events and time.monotonic() < deadline:
        look()
        time.sleep(0.25)
    while not events and time.monotonic() < deadline:
        counter.requests = 0
        began = time.perf_counter()
        mirror_jobs(service)
        durations.append(time.perf_counter() - began)
        requests.append(counter.requests)
        look()
        time.sleep(max(0.0, 2.0 - (time.perf_counter() - began)))
    # How late each start and end reached the portal: Slurm's times are whole seconds. Only those
    # that happened while this watched (a task that started during the page timings above was not
    # looked for then).
    stale, stale_starts, stale_ends = [], [], []
    for pk, start, end in Job.objects.filter(sweep=sweep, start_time__isnull=False).values_list(
        "pk", "start_time", "end_time"
    ):
        if (pk, "RUNNING") in seen and start.timestamp() >= watch_started:
            stale_starts.append(seen[(pk, "RUNNING")] - start.timestamp())
        if end and (pk, "ENDED") in seen and end.timestamp() >= watch_started:
            stale_ends.append(seen[(pk, "ENDED")] - end.timestamp())
    stale = stale_starts + stale_ends
    ran = Job.objects.filter(sweep=sweep, state="COMPLETED").count()
    if events:
        print(f"watched {watch:.0f} s through the portal's own stack with events ({ran} completed)")
    else:
        print(
            f"{len(durations)} passes over {watch:.0f} s with {points} tasks queued ({ran} completed): pass "
            f"p50 {statistics.median(durations) * 1000:.0f} ms, p95 {percentile(durations, 0.95) * 1000:.0f} ms, "
            f"max {max(durations) * 1000:.0f} ms; requests per pass p50 {statistics.median(requests):.0f}, "
            f"max {max(requests)}"
        )
    if stale:
        print(
            f"staleness of {len(stale)} task starts and ends (Slurm's second to the portal's row): "
            f"p50 {statistics.median(stale):.2f} s, p95 {percentile(stale, 0.95):.2f} s, max {max(stale):.2f} s "
            "(goal: 5 s)"
        )
        for label, values in (("starts", stale_starts), ("ends", stale_ends)):
            if values:
                print(
                    f"  {label}: {len(values)}, p50 {statistics.median(values):.2f} s, "
                    f"p95 {percentile(values, 0.95):.2f} s, max {max(values):.2f} s"
                )

    started = time.perf_counter()
    actions.cancel_sweep(user, sweep, pending_only=False)
    while Job.objects.filter(sweep=sweep).exclude(state__in=FINAL_STATES).exists():
        # With --events the portal's own stack writes the cancel (its events and passes); without,
        # this process's passes do.
        if events:
            time.sleep(0.1)
        else:
            mirror_jobs(service)
        if time.perf_counter() - started > 300:
            break
    left = Job.objects.filter(sweep=sweep).exclude(state__in=FINAL_STATES).count()
    print(f"cancel all: every task shown ended in {time.perf_counter() - started:.2f} s ({left} left)")


def pages(user, sweep) -> None:
    """The sweep's page, its cells (what the page polls) and the API's sweep, at this size."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    for label, path in [
        ("page", f"/jobs/sweeps/{sweep.pk}/"),
        ("cells.json", f"/jobs/sweeps/{sweep.pk}/cells.json"),
        ("API sweep", f"/api/v1/sweeps/{sweep.pk}"),
        ("API tasks", f"/api/v1/sweeps/{sweep.pk}/tasks"),
    ]:
        times = []
        for _ in range(3):
            started = time.perf_counter()
            response = client.get(path)
            times.append(time.perf_counter() - started)
            assert response.status_code == 200, (path, response.status_code)
        print(f"{label}: {statistics.median(times) * 1000:.0f} ms, {len(response.content) // 1024} KiB")


if __name__ == "__main__":
    main()
