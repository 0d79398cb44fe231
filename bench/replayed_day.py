"""A day of the pool replayed three times on the dev cluster, side by side:

(a) whole GPUs, no spot, no power policy, no free floor (a memory-sized job takes a whole GPU);
(b) the full policy: GPU shares for memory-sized jobs, spot jobs at night (preempted by paid jobs
    with notice), the free plan's floor, idle nodes powered down at night, a standby node woken
    when more than POWER_PEAK_QUEUE jobs wait for its GPU type;
(c) the full policy on a day that asks for more than the pool holds: a standing offline backlog
    offered as spot (BACKLOG_DEPTH jobs of each GPU type always queued, all day), and one-GPU asks
    right-sized (a job whose memory peak fits a share asks for the share the portal's own rule,
    jobs/right_size.py, gives it: the steady state of a plan that shrinks).

The same seeded day (bench/replay_workload.py) is submitted through the portal's own submission
path (`jobs.actions.submit`, as the API and the job form do) by simulated users of each plan; a
user over their plan's concurrent quota waits and submits when a job of theirs ends, as people
do, so a job's wait runs from when it was wanted. Time is compressed (`--seconds-per-hour`);
the spot QOS's notice and exemption, the idle rule and Slurm's backfill interval and resolution are
scaled with it. Waking
a node (about 20 s on the dev cluster) and starting a container are not: at 20 s an hour a 20 s
wake is a simulated hour, so (b) pays more for its power saving here than on real hardware.

Figures come from Slurm's accounting (sacct, every run of a requeued job) and from sampling
sinfo each second: utilisation (GPU capacity allocated; a share counts its part of a GPU), wait
by plan (mean, p95, jobs never started), preemptions and GPU hours lost to them, node-hours
powered down and energy (the nodes' idle draw from deploy/gpu_types.json while on, plus the
GPUs' max draw above idle while allocated). GPU work done is compute-weighted: the mean compute
utilisation of every GPU of the pool in the telemetry the portal stored (the dev cluster's GPU LOAD
EMULATOR, telemetry/emulator.py, sampling every TELEMETRY_SECONDS: emulated figures, from the
real allocations). Each for the whole day, the peak hours (09:00-18:00) and the night.
Writes var/bench/replayed_day.html (Plotly).

    .venv/bin/python bench/replayed_day.py [--seconds-per-hour 20] [--jobs 360] [--spot-jobs 24] [--only a|b|c]

Three columns take 3 x 24 x seconds-per-hour plus set-up (20 s an hour: about 30 minutes).
"""

from __future__ import annotations

import argparse
import math
import os
import random
import subprocess
import time
from collections import defaultdict
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from _common import BASE_DIR, bench_database, make_user, percentile, retire_user, wait_for_slurm_room
from replay_workload import (
    GPU_MEMORY_GB,
    NIGHT_HOURS,
    OFFLINE_USER,
    Arrival,
    Run,
    day_of_jobs,
    offered_gpu_hours,
    offline_job,
    overlap,
    user_names,
)

IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"
STANDBY_NODE = "gpu-a100-02"
NIGHT_IDLE_MINUTES = 30  # simulated: a node idle this long at night is powered down
POLICY_EVERY_HOURS = 0.25  # simulated: how often the power policy is applied
SPOT_NOTICE_SECONDS, SPOT_EXEMPT_SECONDS = 120, 300  # real-world values, scaled for the replay
BACKLOG_DEPTH = 2  # offline jobs of each GPU type waiting at every moment in (c)
TELEMETRY_SECONDS = 2  # the emulator's sampling interval during the replay (wall seconds)
PEAK_HOURS = frozenset(range(9, 18))


@dataclass(frozen=True)
class Policy:
    label: str
    shares: bool
    spot: bool
    floor: bool
    power: bool
    backlog: bool = False
    right_sized: bool = False


BASELINE = Policy("(a) whole GPUs", shares=False, spot=False, floor=False, power=False)
FULL = Policy("(b) full policy", shares=True, spot=True, floor=True, power=True)
MORE = Policy(
    "(c) + backlog, right-sized", shares=True, spot=True, floor=True, power=True, backlog=True, right_sized=True
)


@dataclass
class Column:
    policy: Policy
    runs: list[Run] = field(default_factory=list)
    arrivals: list[Arrival] = field(default_factory=list)
    never_submitted: list[Arrival] = field(default_factory=list)
    refused: dict[str, int] = field(default_factory=dict)
    power_samples: list[tuple[float, frozenset[str]]] = field(default_factory=list)
    wakes: list[str] = field(default_factory=list)
    day: tuple[float, float] = (0.0, 0.0)  # wall-clock start and end of the replayed day
    # (time, compute %) of every GPU sample the telemetry stored over the day.
    compute_samples: list[tuple[float, float]] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds-per-hour", type=float, default=20.0, help="wall seconds per simulated hour")
    parser.add_argument("--jobs", type=int, default=360, help="ordinary jobs in the day")
    parser.add_argument("--spot-jobs", type=int, default=24, help="spot jobs at night (column b only)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--only", choices=("a", "b", "c"), help="run one column")
    args = parser.parse_args()
    day = day_of_jobs(args.jobs, args.spot_jobs, args.seed)
    shards = {name: gpu_type.shards_per_gpu for name, gpu_type in _catalog().types.items()}
    ordinary = [arrival for arrival in day if not arrival.spot]
    print(
        f"day: {len(ordinary)} jobs ({sum(15 <= a.minutes <= 45 for a in ordinary) / len(ordinary):.0%} of 15-45 min, "
        f"{sum(not a.gpus for a in ordinary)} memory-sized), {len(day) - len(ordinary)} spot at night; "
        f"offered {offered_gpu_hours(ordinary, shards, whole_gpus_only=True):.0f} GPU-h whole, "
        f"{offered_gpu_hours(ordinary, shards, whole_gpus_only=False):.0f} with shares, "
        f"spot {offered_gpu_hours([a for a in day if a.spot], shards, whole_gpus_only=True):.0f}; "
        f"{args.seconds_per_hour:g} s a simulated hour",
        flush=True,
    )
    gpus = defaultdict(int)
    for node in _catalog().dev_nodes:
        gpus[node.gpu_type] += node.gpus
    shares_of_day = []
    for gpu_type, count in gpus.items():
        offered = offered_gpu_hours([a for a in ordinary if a.gpu_type == gpu_type], shards, whole_gpus_only=True)
        shares_of_day.append(f"{gpu_type} {offered / (count * 24):.0%}")
    print(f"offered by GPU type (whole GPUs, share of a day's capacity): {', '.join(shares_of_day)}")
    right_sized = [_right_sized(arrival) for arrival in ordinary]
    print(
        f"right-sized in (c): {sum(a is not b for a, b in zip(ordinary, right_sized, strict=True))} of "
        f"{sum(a.gpus == 1 for a in ordinary)} one-GPU jobs; offered with shares and right-sizing "
        f"{offered_gpu_hours(right_sized, shards, whole_gpus_only=False):.0f} GPU-h; offline backlog "
        f"{BACKLOG_DEPTH} jobs of each GPU type always waiting",
        flush=True,
    )
    policies = {"a": [BASELINE], "b": [FULL], "c": [MORE], None: [BASELINE, FULL, MORE]}[args.only]
    # Slurm's backfill pass every 30 s of wall time would be 90 minutes of a day at 20 s an hour:
    # scaled like the rest (1 s at least), and its planning resolution too; put back afterwards.
    scale = args.seconds_per_hour / 3600
    _cluster_up(f"bf_interval={max(1, round(30 * scale))},bf_resolution={max(1, round(60 * scale))}")
    try:
        columns = _replay_both(day, policies, args.seconds_per_hour)
    finally:
        _cluster_up("")
    report(columns, shards, args.seconds_per_hour)


def _cluster_up(scheduler_parameters: str) -> None:
    """`cluster.sh up` with these SchedulerParameters (deploy/devcluster/lib/configs.sh): it
    rewrites slurm.conf and restarts what changed."""
    env = {**os.environ, "SLURM_SCHEDULER_PARAMETERS": scheduler_parameters}
    print(f"dev cluster up with SchedulerParameters={scheduler_parameters or '(Slurm defaults)'}", flush=True)
    subprocess.run([str(BASE_DIR / "deploy/devcluster/cluster.sh"), "up"], env=env, check=True, capture_output=True)


def _replay_both(day: list[Arrival], policies: list[Policy], seconds_per_hour: float) -> list[Column]:
    with bench_database():
        _write_qos()  # the plans' QOS and spot's, as `make dev` writes them (a fresh cluster has none)
        users = {name: make_user(name, plan) for name, plan in [*user_names(), OFFLINE_USER]}
        try:
            return [replay(policy, day, users, seconds_per_hour) for policy in policies]
        finally:
            _restore_spot_qos()
            for user in users.values():
                retire_user(user)


def replay(policy: Policy, day: list[Arrival], users: dict, seconds_per_hour: float) -> Column:
    from django.test import override_settings

    from testing.servers import portal_stack

    wait_for_slurm_room(len(day))
    _scale_spot_qos(seconds_per_hour)
    asked = [_right_sized(arrival) if policy.right_sized else arrival for arrival in day]
    column = Column(policy, arrivals=[arrival for arrival in asked if policy.spot or not arrival.spot])
    floor = "floor" if policy.floor else ""
    # The portal as it runs (worker, beat's mirror, Slurm's job events on :8000) with its own power
    # policy off: this process applies it on the simulated clock. The beat's emulator samples often
    # enough to tell the hours apart.
    telemetry = {"TELEMETRY_EMULATOR": "1", "TELEMETRY_INTERVAL_SECONDS": str(TELEMETRY_SECONDS)}
    with (
        override_settings(SLURM_FREE_FLOOR_PARTITION=floor),
        portal_stack(worker=True, beat=True, port=8000, extra_env=telemetry),
    ):
        _all_nodes_up()
        print(f"{policy.label}: replaying {len(column.arrivals)} jobs", flush=True)
        day_started = time.time()
        submitted = _submit_the_day(column, users, day_started, seconds_per_hour)
        day_ended = day_started + 24 * seconds_per_hour
        for name in {arrival.user for arrival in column.arrivals}:
            _cli().run("scancel", "--user", users[name].profile.cluster_username, check=False)
        time.sleep(5)  # slurmdbd records the cancels
        column.runs = _accounted_runs(submitted, users, day_started, day_ended)
        column.wakes = _wakes_since(day_started, seconds_per_hour)
        column.compute_samples = _compute_samples(day_started, day_ended)
        _wait_until_no_job_is_active(users)
        _all_nodes_up()
    column.day = (day_started, day_ended)
    return column


def _right_sized(arrival: Arrival) -> Arrival:
    """A one-whole-GPU job whose peak fits a share asks for the share the portal's rule gives it."""
    from jobs.right_size import fitting_share_gb

    if arrival.gpus != 1 or arrival.spot or arrival.peak_fraction >= 1:
        return arrival
    share_gb = fitting_share_gb(arrival.gpu_type, arrival.peak_fraction * GPU_MEMORY_GB[arrival.gpu_type])
    return replace(arrival, gpus=0, memory_gb=share_gb) if share_gb else arrival


def _compute_samples(since: float, until: float) -> list[tuple[float, float]]:
    from telemetry.models import GpuSampleRaw

    rows = GpuSampleRaw.objects.filter(
        time__gte=datetime.fromtimestamp(since, UTC), time__lt=datetime.fromtimestamp(until, UTC)
    ).values_list("time", "compute_util")
    return [(moment.timestamp(), util) for moment, util in rows.iterator()]


def _top_up_backlog(column: Column, users: dict, rng: random.Random, hour: float, seconds_per_hour: float) -> dict:
    """Submit offline jobs until BACKLOG_DEPTH of each GPU type wait; returns portal job id -> arrival."""
    from jobs import actions
    from jobs.models import Job

    owner = users[OFFLINE_USER[0]]
    waiting = defaultdict(int)
    for gpu_type in Job.objects.filter(owner=owner, state__in=("SUBMITTING", "PENDING")).values_list(
        "gpu_type", flat=True
    ):
        waiting[gpu_type] += 1
    submitted = {}
    for gpu_type in sorted(GPU_MEMORY_GB):
        for _ in range(BACKLOG_DEPTH - waiting[gpu_type]):
            arrival = offline_job(rng, hour, gpu_type)
            try:
                job = actions.submit(owner, _spec(owner, arrival, column.policy, seconds_per_hour))
            except Exception as exc:  # noqa: BLE001 - counted and reported, the day goes on
                column.refused[f"backlog {type(exc).__name__}"] = (
                    column.refused.get(f"backlog {type(exc).__name__}", 0) + 1
                )
                break
            column.arrivals.append(arrival)
            submitted[job.pk] = arrival
    return submitted


def _submit_the_day(column: Column, users: dict, day_started: float, seconds_per_hour: float) -> dict[int, Arrival]:
    """Every arrival handed to the portal when it is due and its user's quota lets it; returns
    the portal's job id -> arrival. Samples the nodes' power states each second and applies the
    power policy every POLICY_EVERY_HOURS on the simulated clock."""
    from jobs import actions
    from jobs.submission.quota import QuotaExceeded

    pending = list(column.arrivals)
    backlog: dict[str, list[Arrival]] = defaultdict(list)
    submitted: dict[int, Arrival] = {}
    next_policy = next_sample = next_backlog = 0.0
    backlog_rng = random.Random(11)
    day_ends = day_started + 24 * seconds_per_hour
    while time.time() < day_ends:
        now = time.time()
        hour = (now - day_started) / seconds_per_hour
        while pending and pending[0].hour <= hour:
            arrival = pending.pop(0)
            backlog[arrival.user].append(arrival)
        for name, waiting in backlog.items():
            while waiting:
                try:
                    job = actions.submit(users[name], _spec(users[name], waiting[0], column.policy, seconds_per_hour))
                except QuotaExceeded:
                    break  # the user waits for a job of theirs to end
                except Exception as exc:  # noqa: BLE001 - counted and reported, the day goes on
                    column.refused[type(exc).__name__] = column.refused.get(type(exc).__name__, 0) + 1
                    waiting.pop(0)
                    continue
                submitted[job.pk] = waiting.pop(0)
        if now >= next_sample:
            column.power_samples.append((now, _powered_down_nodes()))
            next_sample = now + 1
        if column.policy.backlog and now >= next_backlog:
            submitted.update(_top_up_backlog(column, users, backlog_rng, hour, seconds_per_hour))
            next_backlog = now + 1
        if column.policy.power and hour >= next_policy:
            _apply_power_policy(hour, seconds_per_hour)
            next_policy = hour + POLICY_EVERY_HOURS
        time.sleep(0.2)
    column.never_submitted = [arrival for waiting in backlog.values() for arrival in waiting] + pending
    return submitted


def _spec(user, arrival: Arrival, policy: Policy, seconds_per_hour: float):
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from plans.catalog import plan_for

    seconds = arrival.minutes / 60 * seconds_per_hour
    size = (
        {"gpu_count": arrival.gpus}
        if arrival.gpus
        else ({"gpu_memory_gb": arrival.memory_gb} if policy.shares else {"gpu_count": 1})
    )
    data = {
        "name": f"replay-{arrival.user}",
        "image": IMAGE,
        "gpu_type": arrival.gpu_type,
        "command": f"sleep {seconds:.1f}",
        "time_limit_minutes": max(2, math.ceil(seconds * 2 / 60)),
        "spot": arrival.spot,
        **size,
    }
    return parse_job_spec(data, plan=plan_for(user), policy=SpecPolicy.from_settings())


def _apply_power_policy(hour: float, seconds_per_hour: float) -> None:
    """The portal's policy with the simulated hour's window: the idle rule only at night, the
    standby node woken above POWER_PEAK_QUEUE waiting jobs."""
    from django.test import override_settings

    from cluster.actions.mirror import mirror_nodes
    from cluster.clusters.services import rest_client
    from console.actions.power import apply_power_policy

    idle_seconds = round(NIGHT_IDLE_MINUTES / 60 * seconds_per_hour) if int(hour) % 24 in NIGHT_HOURS else 0
    mirror_nodes(rest_client())
    with override_settings(
        POWER_DAY_SUSPEND_SECONDS=idle_seconds,
        POWER_NIGHT_SUSPEND_SECONDS=idle_seconds,
        POWER_STANDBY_NODES=[STANDBY_NODE],
    ):
        apply_power_policy()


def _powered_down_nodes() -> frozenset[str]:
    """Nodes powered down or powering down (sinfo's ~ and %), not those powering up (#)."""
    listed = _cli().run("sinfo", "--Node", "--noheader", "--format=%N,%t", check=False).stdout
    return frozenset(
        name for name, _, state in (line.partition(",") for line in listed.split()) if state[-1:] in ("~", "%")
    )


def _accounted_runs(submitted: dict[int, Arrival], users: dict, since: float, until: float) -> list[Run]:
    from jobs.models import Job

    by_slurm_id = {
        str(slurm_id): submitted[pk]
        for pk, slurm_id in Job.objects.filter(pk__in=submitted).values_list("pk", "slurm_job_id")
        if slurm_id
    }
    names = ",".join(sorted({users[arrival.user].profile.cluster_username for arrival in submitted.values()}))
    start = datetime.fromtimestamp(since - 60, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    listed = _cli().run(
        "env", "TZ=UTC0", "SLURM_TIME_FORMAT=%s", "sacct", "--allocations", "--duplicates", "--parsable2",
        "--noheader", f"--user={names}", f"--starttime={start}", "--format=JobIDRaw,State,Start,End",
    ).stdout  # fmt: skip
    runs = []
    for line in listed.splitlines():
        job_id, state, started, ended = line.split("|")
        if job_id in by_slurm_id:
            runs.append(Run(by_slurm_id[job_id], _epoch(started), _epoch(ended) or until, state.split()[0]))
    return runs


def _epoch(text: str) -> float | None:
    return float(text) if text.isdigit() and int(text) > 0 else None


def _wakes_since(since: float, seconds_per_hour: float) -> list[str]:
    from console.models import PowerDecision

    decided = PowerDecision.objects.filter(
        kind=PowerDecision.Kind.WOKEN, decided_at__gte=datetime.fromtimestamp(since, UTC)
    ).order_by("decided_at")
    return [
        f"{decision.node} at {_clock((decision.decided_at.timestamp() - since) / seconds_per_hour)} "
        f"with {decision.queue_length} jobs waiting"
        for decision in decided
    ]


def _clock(hour: float) -> str:
    return f"{int(hour):02d}:{int(hour % 1 * 60):02d}"


def _wait_until_no_job_is_active(users: dict, timeout: float = 180) -> None:
    from jobs.models import FINAL_STATES, Job

    deadline = time.monotonic() + timeout
    while Job.objects.filter(owner__in=users.values()).exclude(state__in=FINAL_STATES).exists():
        if time.monotonic() > deadline:
            raise SystemExit("the portal still shows active replay jobs after the cancel")
        time.sleep(1)


def _all_nodes_up(timeout: float = 240) -> None:
    """Every node powered up and undrained (a column leaves its standby and powered-down nodes),
    before a column and after it."""
    cli = _cli()
    deadline = time.monotonic() + timeout
    while True:
        listed = cli.run("sinfo", "--Node", "--noheader", "--format=%N,%t", check=False).stdout
        states = dict(line.partition(",")[::2] for line in listed.split())
        if states and all(state == "idle" for state in states.values()):
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"nodes not back up: {states}")
        for name, state in states.items():
            if state.endswith("~") or "drain" in state or state.startswith("drng"):
                cli.run("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)
                cli.run("scontrol", "update", f"NodeName={name}", "State=POWER_UP", check=False)
        time.sleep(3)


def _scale_spot_qos(seconds_per_hour: float) -> None:
    from django.test import override_settings

    scale = seconds_per_hour / 3600
    with override_settings(
        SPOT_GRACE_SECONDS=max(1, round(SPOT_NOTICE_SECONDS * scale)),
        SPOT_PREEMPT_EXEMPT_SECONDS=max(1, round(SPOT_EXEMPT_SECONDS * scale)),
    ):
        _write_qos()


def _restore_spot_qos() -> None:
    _write_qos()


def _write_qos() -> None:
    from plans.slurm_limits import all_qos_limits

    for limits in all_qos_limits():
        _cli().ensure_qos(limits)


def _cli():
    from cluster.clusters.services import slurm_cli

    return slurm_cli()


# --- Figures -----------------------------------------------------------------------------------


def _catalog():
    from django.conf import settings

    from foundation.gpu_types import load_gpu_types

    return load_gpu_types(settings.GPU_TYPES_FILE)


def report(columns: list[Column], shards: dict[str, int], seconds_per_hour: float) -> None:
    from django.conf import settings

    catalog = _catalog()
    total_gpus = sum(node.gpus for node in catalog.dev_nodes)
    # A node's draw while on and idle: its host and its GPUs idle.
    idle_watts = {
        node.name: settings.NODE_HOST_IDLE_WATTS + node.gpus * (catalog.types[node.gpu_type].idle_w or 0)
        for node in catalog.dev_nodes
    }
    rows: dict[str, list[str]] = defaultdict(list)
    series = []
    for column in columns:
        figures = _figures(column, shards, seconds_per_hour, total_gpus, idle_watts)
        series.append((column.policy.label, figures.pop("hourly")))
        for label, value in figures.items():
            rows[label].append(value)
    width = max(len(label) for label in rows)
    print()
    print(" " * width + "".join(f"  {column.policy.label:>26}" for column in columns))
    for label, values in rows.items():
        print(label.ljust(width) + "".join(f"  {value:>26}" for value in values))
    for column in columns:
        for wake in column.wakes:
            print(f"{column.policy.label}: standby woken: {wake}")
        if column.refused:
            print(f"{column.policy.label}: refused at submission: {column.refused}")
    _chart(series)


def _figures(column: Column, shards: dict, seconds_per_hour: float, total_gpus: int, idle_watts: dict) -> dict:
    types = _catalog().types
    low, high = column.day
    whole = not column.policy.shares
    hours = [0.0] * 24
    allocated = spot_allocated = offline_allocated = lost = busy_watt_hours = 0.0
    first_start: dict[int, float] = {}
    preempted = 0
    for run in column.runs:
        if run.start is None:
            continue
        fraction = run.arrival.gpu_fraction(shards, whole_gpus_only=whole)
        held = fraction * overlap(run.start, run.end, low, high)
        allocated += held
        gpu_type = types[run.arrival.gpu_type]
        busy_watt_hours += held / seconds_per_hour * ((gpu_type.max_w or 0) - (gpu_type.idle_w or 0))
        for hour in range(24):
            bin_start = low + hour * seconds_per_hour
            hours[hour] += fraction * overlap(run.start, run.end, bin_start, bin_start + seconds_per_hour)
        if run.arrival.user == OFFLINE_USER[0]:
            offline_allocated += held
        if run.arrival.spot:
            spot_allocated += held
            if run.state == "PREEMPTED":
                preempted += 1
                lost += held
        else:
            key = id(run.arrival)
            first_start[key] = min(first_start.get(key, run.start), run.start)
    capacity = total_gpus * (high - low)
    waits: dict[str, list[float]] = defaultdict(list)
    never: dict[str, int] = defaultdict(int)
    waiting_at = [0] * 24
    for arrival in column.arrivals:
        if arrival.spot:
            continue
        arrived = low + arrival.hour * seconds_per_hour
        started = first_start.get(id(arrival))
        if started is None:
            never[arrival.plan] += 1
        waits[arrival.plan].append(((started or high) - arrived) / seconds_per_hour * 60)
        for hour in range(24):
            moment = low + (hour + 0.5) * seconds_per_hour
            waiting_at[hour] += arrived <= moment < (started or high)
    down_node_seconds, on_watt_hours, down_by_hour = 0.0, 0.0, [0.0] * 24
    samples = column.power_samples
    for (moment, down), (following, _) in zip(samples, samples[1:] + [(high, frozenset())], strict=True):
        span = max(0.0, min(following, high) - moment)
        down_node_seconds += len(down) * span
        on_watt_hours += sum(watts for node, watts in idle_watts.items() if node not in down) * span / seconds_per_hour
        hour = int((moment - low) / seconds_per_hour)
        if 0 <= hour < 24:
            down_by_hour[hour] += len(down) * span / seconds_per_hour

    def allocated_in(period) -> float:
        return sum(hours[hour] for hour in period) / (total_gpus * len(period) * seconds_per_hour)

    def work_in(period) -> str:
        utils = [util for moment, util in column.compute_samples if int((moment - low) / seconds_per_hour) in period]
        return f"{sum(utils) / len(utils) / 100:.0%}" if utils else "-"

    figures = {
        "GPU capacity allocated": f"{allocated / capacity:.0%}",
        "  peak (09-18) / night (22-06)": f"{allocated_in(PEAK_HOURS):.0%} / {allocated_in(NIGHT_HOURS):.0%}",
        "  of which spot": f"{spot_allocated / capacity:.0%}",
        "    of which offline backlog": f"{offline_allocated / capacity:.0%}",
        "GPU work done (compute-weighted)": work_in(range(24)),
        "  work: peak / night": f"{work_in(PEAK_HOURS)} / {work_in(NIGHT_HOURS)}",
    }
    for plan in ("free", "pro", "enterprise"):
        values = waits.get(plan) or [0.0]
        figures[f"wait {plan}: mean / p95 (min)"] = f"{sum(values) / len(values):.0f} / {percentile(values, 0.95):.0f}"
        figures[f"  {plan} jobs never started"] = f"{never.get(plan, 0)} of {len(waits.get(plan, []))}"
    all_waits = [value for values in waits.values() for value in values]
    figures["wait all: mean (min)"] = f"{sum(all_waits) / max(1, len(all_waits)):.0f}"
    figures["left unsubmitted (over quota at 24:00)"] = str(len(column.never_submitted))
    figures["spot runs preempted"] = str(preempted)
    figures["  GPU-hours lost to preemption"] = f"{lost / seconds_per_hour:.1f}"
    figures["node-hours powered down"] = f"{down_node_seconds / seconds_per_hour:.1f}"
    figures["energy (kWh, simulated day)"] = f"{(on_watt_hours + busy_watt_hours) / 1000:.0f}"
    figures["hourly"] = {
        "gpus": [held / seconds_per_hour for held in hours],
        "waiting": waiting_at,  # arrived and not started: queued in Slurm, or held back by the user's quota
        "down": down_by_hour,
        "work": [
            _mean_compute(column.compute_samples, low + hour * seconds_per_hour, seconds_per_hour) for hour in range(24)
        ],
    }
    return figures


def _mean_compute(samples: list[tuple[float, float]], start: float, span: float) -> float | None:
    """The pool's mean compute utilisation (%) over [start, start + span)."""
    utils = [util for moment, util in samples if start <= moment < start + span]
    return sum(utils) / len(utils) if utils else None


def _chart(series: list[tuple[str, dict]]) -> None:
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    panels = ("gpus", "work", "waiting", "down")
    figure = make_subplots(
        rows=len(panels),
        cols=1,
        shared_xaxes=True,
        subplot_titles=(
            "GPUs allocated",
            "GPU work done: mean compute % of the pool (emulated telemetry)",
            "jobs waiting",
            "nodes powered down",
        ),
    )
    colours = ("#1f77b4", "#d62728", "#2ca02c")  # (a), (b) and (c), the same in every panel
    for (label, hourly), colour in zip(series, colours, strict=False):
        for row, key in enumerate(panels, start=1):
            figure.add_trace(
                go.Scatter(
                    x=list(range(24)),
                    y=hourly[key],
                    name=label,
                    legendgroup=label,
                    showlegend=row == 1,
                    line={"color": colour},
                ),
                row=row,
                col=1,
            )
    figure.update_xaxes(title_text="hour of the replayed day (night 22:00-06:00)", row=len(panels), col=1)
    figure.update_layout(title="A replayed day: whole GPUs, the full policy, and a day that asks for more", height=1000)
    path = Path(BASE_DIR) / "var" / "bench" / "replayed_day.html"
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.write_html(path, include_plotlyjs=True)
    print(f"chart: {path}")


if __name__ == "__main__":
    main()
