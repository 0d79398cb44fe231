"""Slurm's job events under pressure, in one run against the real dev cluster:

1. another user's cancel while thousands of jobs are cancelled at once: from the cancel
   request to the portal's row showing CANCELLED (the API reads that row), for a few bystander
   jobs cancelled one after another during the mass cancel; and how long until every one of the
   thousands shows;
2. what the hooks cost slurmctld: short jobs submitted (sbatch's throughput) and run to their
   end, with the event hooks in slurm.conf and without them (`SLURM_EVENT_HOOKS=0 cluster.sh up`
   restarts the cluster without them), rounds interleaved.

    .venv/bin/python bench/event_hooks.py [--mass 2000] [--bystanders 8] [--runs 1] [--jobs 200] [--rounds 2]
        [--sets 'without hooks,with hooks']

The web process, a worker and beat serve a throwaway database on port 8000, where the dev cluster's
forwarder posts. Leaves the cluster with its hooks on.
"""

import argparse
import os
import statistics
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from _common import BASE_DIR, bench_database, make_user, percentile, retire_user, wait_for_slurm_room
from mirror_passes import slurm_cancel_all, submit_held


def wait_for_empty_spool(spool: Path, timeout: float = 120) -> None:
    """Until the forwarder has sent every event waiting (an earlier run's, sent while no portal
    listened, would otherwise arrive in the middle of this one)."""
    deadline = time.monotonic() + timeout
    while any(name != ".sending" for name in os.listdir(spool)) or any((spool / ".sending").iterdir()):
        if time.monotonic() > deadline:
            raise SystemExit(f"the forwarder left events in {spool} for {timeout:.0f} s")
        time.sleep(0.1)


def _batch_dirs(spool: Path) -> list[Path]:
    # The forwarder's batches in flight, a directory each (deploy/slurm-events/gpupool-event-forwarder).
    try:
        return [spool / ".sending" / name for name in os.listdir(spool / ".sending")]
    except OSError:
        return []


def bystanders_during_mass_cancel(mass: int, bystanders: int, user, other, spool: Path) -> list[float]:
    from cluster.clusters.services import rest_client
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import Job
    from testing.servers import portal_stack
    from testing.slurm import wait_for

    slurm = rest_client(user.profile.cluster_username)
    theirs = rest_client(other.profile.cluster_username)
    wait_for_slurm_room(mass + bystanders + 1)
    ids = submit_held(slurm, mass)
    their_ids = submit_held(theirs, bystanders + 1)
    # One cancel before the mass one: a portal that has been up a while has taken events (its
    # threads and their database connections exist); each run's portal here is new.
    first_event_job = their_ids.pop(0)
    with portal_stack(worker=True, beat=True, port=8000):
        deadline = time.monotonic() + 120
        while Job.objects.filter(slurm_job_id__any_of=ids + their_ids, state="PENDING").count() < mass + bystanders:
            if time.monotonic() > deadline:
                raise SystemExit("the held jobs never all showed PENDING")
            mirror_jobs(rest_client())
            time.sleep(0.5)
        wait_for_empty_spool(spool)
        theirs.cancel_job(first_event_job)
        wait_for(
            Job.objects.filter(slurm_job_id=first_event_job, state="CANCELLED").exists,
            timeout=60,
            interval=0.05,
            what="the first event's cancel shown",
        )
        shown: dict[int, float] = {}
        sent: dict[int, float] = {}
        returned: dict[int, float] = {}

        def cancel_bystanders():
            time.sleep(0.3)
            for job_id in their_ids:
                sent[job_id] = time.monotonic()
                theirs.cancel_job(job_id)
                returned[job_id] = time.monotonic()
                time.sleep(0.5)

        scancel_took = None

        def mass_cancel():
            nonlocal scancel_took
            slurm_cancel_all(user)
            scancel_took = time.monotonic() - started

        spooled: dict[int, float] = {}
        taken: dict[int, float] = {}
        posted: dict[int, float] = {}

        def watch_spool():
            # Each bystander's event file: when it appears (slurmctld's side of the delay), when the
            # forwarder takes it into .sending (until then it waits for the batch in flight), and
            # when it is gone (the portal answered its batch, after writing the row).
            names = {str(job_id): job_id for job_id in their_ids}
            while len(posted) < len(names) and time.monotonic() - started < 60:
                seen_now: dict[str, set[int]] = {}
                # The spool first, then the batches: a file moved meanwhile is in a batch by then.
                for label, folders in (("spool", lambda: [spool]), ("sending", lambda: _batch_dirs(spool))):
                    entries = []
                    for folder in folders():
                        try:
                            entries += os.listdir(folder)
                        except OSError:
                            continue
                    seen_now[label] = {names[e.split(".", 1)[0]] for e in entries if e.split(".", 1)[0] in names}
                now = time.monotonic()
                for job_id in seen_now["spool"] | seen_now["sending"]:
                    if job_id in returned:
                        spooled.setdefault(job_id, now)
                for job_id in seen_now["sending"]:
                    if job_id in returned:
                        taken.setdefault(job_id, now)
                for job_id in set(spooled) - seen_now["spool"] - seen_now["sending"]:
                    taken.setdefault(job_id, now)
                    posted.setdefault(job_id, now)
                time.sleep(0.005)

        # Both cancels run beside this loop, which looks every 10 ms for the cancels awaited.
        started = time.monotonic()
        threads = [threading.Thread(target=cancel_bystanders), threading.Thread(target=mass_cancel)]
        if os.environ.get("BENCH_VERBOSE"):
            threads.append(threading.Thread(target=watch_spool))
        for thread in threads:
            thread.start()
        all_shown = None
        last_mass_check = 0.0
        while time.monotonic() - started < 300:
            # Only the cancels awaited: the loop's own queries compete for the two cores.
            awaited = set(returned.copy()) - set(shown)
            if awaited:
                cancelled = set(
                    Job.objects.filter(slurm_job_id__in=awaited, state="CANCELLED").values_list(
                        "slurm_job_id", flat=True
                    )
                )
                now = time.monotonic()  # an upper bound: the row was written before the query returned
                for job_id in cancelled:
                    shown.setdefault(job_id, now)
            now = time.monotonic()
            if all_shown is None and now - last_mass_check > 0.1:
                last_mass_check = now
                # One array parameter (foundation/lookups.py), not 2,000 placeholders: building those
                # every 0.1 s cost this process tens of milliseconds of the two cores each time.
                if not Job.objects.filter(slurm_job_id__any_of=ids).exclude(state="CANCELLED").exists():
                    all_shown = time.monotonic() - started
            if all_shown is not None and len(shown) == bystanders:
                break
            time.sleep(0.01)
        for thread in threads:
            thread.join()
    delays = [shown[job_id] - returned[job_id] for job_id in shown]
    if os.environ.get("BENCH_VERBOSE"):
        for job_id in sorted(shown, key=returned.get):
            print(
                f"  job {job_id}: cancelled {returned[job_id] - started:.2f} s into the mass cancel, "
                f"shown {1000 * (shown[job_id] - returned[job_id]):.0f} ms later"
                + (
                    f" (its event in the spool after {1000 * (spooled[job_id] - returned[job_id]):.0f} ms,"
                    f" taken by the forwarder {1000 * (taken.get(job_id, now) - spooled[job_id]):.0f} ms later,"
                    f" answered {1000 * (posted.get(job_id, now) - taken.get(job_id, now)):.0f} ms after that)"
                    if job_id in spooled
                    else ""
                )
            )
    calls = [returned[job_id] - sent[job_id] for job_id in returned]
    print(
        f"{mass} jobs cancelled at once (scancel {scancel_took:.1f} s), all shown CANCELLED "
        f"{all_shown if all_shown is None else round(all_shown, 1)} s after it started"
    )
    print(
        f"  another user's cancel meanwhile: {len(delays)} of {bystanders} shown, "
        f"p50 {percentile(delays, 0.5) * 1000:.0f} ms, p95 {percentile(delays, 0.95) * 1000:.0f} ms, "
        f"max {max(delays) * 1000:.0f} ms after slurmrestd answered the cancel (goal: within 500 ms); "
        f"the cancel request itself took p50 {percentile(calls, 0.5) * 1000:.0f} ms, max {max(calls) * 1000:.0f} ms"
    )
    # Only the cancels made while the mass cancel ran count toward the pooled figure.
    return [shown[job_id] - returned[job_id] for job_id in shown if returned[job_id] - started < scancel_took]


# slurm.conf's hooks (deploy/devcluster/lib/configs.sh): none; the completions alone (jobcomp/lua,
# in slurmctld's process); what the portal installs (those and the start, told by slurmd's
# Prolog on the job's node); the start told by PrologSlurmctld instead (slurmctld forks the hook
# for each job); and that with completions run as a program (jobcomp/script), as the first
# sender was.
HOOK_SETS = {
    "without hooks": "0",
    "completions only": "jobcomp",
    "with hooks": "1",
    "slurmctld prolog": "ctld",
    "script completions": "script",
}


def cluster_up(hooks: str) -> None:
    env = {**os.environ, "SLURM_EVENT_HOOKS": hooks}
    subprocess.run([str(BASE_DIR / "deploy/devcluster/cluster.sh"), "up"], env=env, check=True, capture_output=True)


def run_short_jobs(user, count: int) -> tuple[float, float]:
    """Seconds to submit `count` jobs of `true`, 8 submissions at a time (sbatch's throughput,
    with the jobs starting and ending meanwhile, so the hooks run beside the submissions), and
    seconds from the first submission until slurmctld lists none of them running."""
    from cluster.clusters.services import rest_client
    from testing.slurm import submission

    slurm = rest_client(user.profile.cluster_username)
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=8) as pool:
        ids = set(
            pool.map(
                lambda _: slurm.submit_job(
                    submission("true", tres_per_node="gres/gpu:rtx4090:1", time_limit_minutes=2)
                ),
                range(count),
            )
        )
    submitted = time.monotonic() - started
    while True:
        live = {entry.job_id for entry in slurm.list_job_states() if entry.states[0] not in ("COMPLETED", "FAILED")}
        if not ids & live:
            return submitted, time.monotonic() - started
        time.sleep(0.1)


def hook_cost(jobs: int, rounds: int, user, sets: list[str]) -> None:
    timings: dict[str, list[tuple[float, float]]] = {label: [] for label in sets}
    try:
        for _ in range(rounds):
            for label in sets:
                cluster_up(HOOK_SETS[label])
                timings[label].append(run_short_jobs(user, jobs))
    finally:
        cluster_up(HOOK_SETS["with hooks"])
    for index, what in enumerate(("sbatch throughput: all submitted", "run to their end")):
        medians = {label: statistics.median(value[index] for value in values) for label, values in timings.items()}
        without = medians["without hooks"]
        print(f"{jobs} short jobs (`true`), {what}, {rounds} rounds each, median:")
        for label, seconds in medians.items():
            rounds_text = ", ".join(f"{value[index]:.1f}" for value in timings[label])
            print(
                f"  {label:18s} {seconds:5.1f} s ({jobs / seconds:.1f} jobs/s); RATIO to without "
                f"{seconds / without:.3f} (rounds: {rounds_text} s)"
            )


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--mass", type=int, default=2000)
    parser.add_argument("--bystanders", type=int, default=8)
    parser.add_argument("--runs", type=int, default=1, help="mass cancels, one after another; their figures pooled")
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sets", default=",".join(HOOK_SETS), help=f"hook sets to compare, of: {', '.join(HOOK_SETS)}")
    args = parser.parse_args()
    from django.conf import settings

    if not settings.SLURM_EVENTS_SECRET:
        raise SystemExit("no events secret: start the dev cluster (make cluster-up) first")
    spool = Path(settings.DEVCLUSTER_DIR) / "root/var/spool/gpupool-events"
    print(f"slurm {settings.SLURM_RELEASE}; hook spool {spool}")
    with bench_database():
        user = make_user("mass")
        other = make_user("bystander")
        try:
            during: list[float] = []
            for _ in range(args.runs if args.mass else 0):
                during += bystanders_during_mass_cancel(args.mass, args.bystanders, user, other, spool)
            if during and args.runs > 1:
                over = sum(1 for delay in during if delay > 0.5)
                print(
                    f"{args.runs} mass cancels, another user's {len(during)} cancels made during them: "
                    f"p50 {percentile(during, 0.5) * 1000:.0f} ms, p95 {percentile(during, 0.95) * 1000:.0f} ms, "
                    f"max {max(during) * 1000:.0f} ms; over 500 ms: {over}"
                )
            if args.jobs:
                sets = [label.strip() for label in args.sets.split(",")]
                if "without hooks" not in sets or not set(sets) <= set(HOOK_SETS):
                    raise SystemExit(
                        f"--sets: a comma-separated choice of {', '.join(HOOK_SETS)}, with 'without hooks'"
                    )
                hook_cost(args.jobs, args.rounds, user, sets)
        finally:
            retire_user(user)
            retire_user(other)


if __name__ == "__main__":
    main()
