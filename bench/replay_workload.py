"""The replayed day's workload and its figures: pure functions, no Django, no Slurm.

The day (docs/product.md, "Day and night"; the source article's mix): 87 % of jobs run 15-45
minutes, the rest 1-3 hours; about a third ask for GPU memory rather than whole GPUs (a share of
one GPU); arrivals follow a diurnal curve (quiet at night, a plateau from 09:00 to 18:00); free,
Pro and Enterprise users. Spot demand, checkpointable jobs of paid users that run only because
night GPUs are cheap, arrives at night and exists only where spot is offered.

Each one-whole-GPU job also has the fraction of its GPU's memory it peaks at (`peak_fraction`): where
right-sizing is on, a job whose peak fits a share asks for that share. The figure the draw follows:
55 % of the jobs on Perlmutter's 80 GB A100s peaked at half the card's memory or less (Cankur et al.,
"Characterizing Production GPU Workloads using System-wide Telemetry Data", 2025,
arXiv:2502.18680); those draw a peak from 10-50 % of the card, the others from 55-95 %.

The offline backlog (distillation, data augmentation: the article's examples) is a standing queue of
spot work that any idle GPU takes and any paid job preempts: `offline_job` draws one.

Times here are simulated hours from midnight; bench/replayed_day.py maps them onto the clock.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace

# Relative arrivals per hour of the day: night low, morning ramp, 09:00-18:00 plateau.
HOURLY_WEIGHT = (
    0.2, 0.15, 0.1, 0.1, 0.1, 0.15, 0.3, 0.6, 1.0, 1.6, 1.8, 1.8,
    1.5, 1.7, 1.8, 1.8, 1.6, 1.3, 1.0, 0.8, 0.7, 0.6, 0.4, 0.3,
)  # fmt: skip
NIGHT_HOURS = frozenset((22, 23, 0, 1, 2, 3, 4, 5))

# Users of each plan, and each plan's share of the day's jobs.
USERS = {"free": 6, "pro": 6, "enterprise": 3}
PLAN_SHARE = (("free", 0.25), ("pro", 0.45), ("enterprise", 0.30))
# GPU types each plan's users pick from, with weights (their plans allow these, docs/product.md).
PLAN_GPU_TYPES = {
    "free": (("rtx4090", 1.0),),
    "pro": (("rtx4090", 0.45), ("a100", 0.55)),
    "enterprise": (("rtx4090", 0.1), ("a100", 0.5), ("h100", 0.4)),
}
MOST_WHOLE_GPUS = {"free": 1, "pro": 2, "enterprise": 4}
GPU_MEMORY_GB = {"rtx4090": 24, "a100": 40, "h100": 80}
GPUS_PER_NODE = {"rtx4090": 4, "a100": 4, "h100": 2}
MEMORY_SIZED_SHARE = 0.33
SHORT_SHARE = 0.87  # 15-45 minutes
# Of one-whole-GPU jobs, those peaking at half the card's memory or less (Perlmutter, above).
FITS_HALF_SHARE = 0.55
# The offline backlog's owner (a paid plan: spot is for plans that pay for what they use) and its jobs.
OFFLINE_USER = ("offline1", "enterprise")
OFFLINE_MINUTES = (60, 120)


@dataclass(frozen=True)
class Arrival:
    hour: float  # simulated hours from midnight
    user: str  # e.g. "pro3"
    plan: str
    gpu_type: str
    gpus: int  # whole GPUs; 0 for a memory-sized job
    memory_gb: int  # a memory-sized job's GB of one GPU; 0 otherwise
    minutes: int  # simulated run length
    spot: bool = False
    peak_fraction: float = 1.0  # of one GPU's memory, a one-whole-GPU job's peak

    def gpu_fraction(self, shards_per_gpu: dict[str, int], *, whole_gpus_only: bool) -> float:
        """The GPUs it holds: a memory-sized job holds its shards' part of one GPU where shares
        are offered, a whole GPU where they are not."""
        if self.gpus:
            return float(self.gpus)
        if whole_gpus_only:
            return 1.0
        per_gpu = shards_per_gpu[self.gpu_type]
        return math.ceil(self.memory_gb * per_gpu / GPU_MEMORY_GB[self.gpu_type]) / per_gpu


def user_names() -> list[tuple[str, str]]:
    return [(f"{plan}{index}", plan) for plan, count in USERS.items() for index in range(1, count + 1)]


def _pick(rng: random.Random, weighted) -> str:
    names, weights = zip(*weighted, strict=True)
    return rng.choices(names, weights=weights)[0]


def day_of_jobs(jobs: int, spot_jobs: int, seed: int) -> list[Arrival]:
    """`jobs` ordinary arrivals over the diurnal curve and `spot_jobs` spot arrivals at night,
    sorted by time. The same seed gives the same day."""
    rng = random.Random(seed)
    by_plan = {plan: [name for name, owner_plan in user_names() if owner_plan == plan] for plan in USERS}
    arrivals = []
    hours = rng.choices(range(24), weights=HOURLY_WEIGHT, k=jobs)
    for hour in hours:
        plan = _pick(rng, PLAN_SHARE)
        gpu_type = _pick(rng, PLAN_GPU_TYPES[plan])
        if rng.random() < MEMORY_SIZED_SHARE:
            gpus, memory = 0, rng.choice([gb for gb in (4, 8, 12, 16) if gb <= GPU_MEMORY_GB[gpu_type] // 2])
        else:
            most = min(MOST_WHOLE_GPUS[plan], GPUS_PER_NODE[gpu_type])
            gpus, memory = min(most, rng.choices((1, 2, 4), weights=(0.8, 0.15, 0.05))[0]), 0
        minutes = rng.randint(15, 45) if rng.random() < SHORT_SHARE else rng.randint(60, 180)
        arrivals.append(Arrival(hour + rng.random(), rng.choice(by_plan[plan]), plan, gpu_type, gpus, memory, minutes))
    paid = by_plan["pro"] + by_plan["enterprise"]
    night = sorted(NIGHT_HOURS)
    for _ in range(spot_jobs):
        user = rng.choice(paid)
        plan = "pro" if user.startswith("pro") else "enterprise"
        gpu_type = _pick(rng, PLAN_GPU_TYPES[plan])
        gpus = min(rng.choice((1, 2)), GPUS_PER_NODE[gpu_type])
        hour = rng.choice(night) + rng.random()
        arrivals.append(Arrival(hour, user, plan, gpu_type, gpus, 0, rng.randint(120, 240), spot=True))
    return sorted(_with_peaks(arrivals, seed), key=lambda arrival: arrival.hour)


def _with_peaks(arrivals: list[Arrival], seed: int) -> list[Arrival]:
    """Each one-whole-GPU job's memory peak, from a generator of its own: the day's jobs stay the
    same draw as without it."""
    rng = random.Random(seed * 7919 + 1)
    drawn = []
    for arrival in arrivals:
        if arrival.gpus == 1 and not arrival.spot:
            low, high = (0.10, 0.50) if rng.random() < FITS_HALF_SHARE else (0.55, 0.95)
            arrival = replace(arrival, peak_fraction=round(rng.uniform(low, high), 3))
        drawn.append(arrival)
    return drawn


def offline_job(rng: random.Random, hour: float, gpu_type: str) -> Arrival:
    """One job of the offline backlog: a whole GPU of `gpu_type`, spot, an hour or two."""
    name, plan = OFFLINE_USER
    return Arrival(hour, name, plan, gpu_type, 1, 0, rng.randint(*OFFLINE_MINUTES), spot=True)


def offered_gpu_hours(arrivals: list[Arrival], shards_per_gpu: dict[str, int], *, whole_gpus_only: bool) -> float:
    return sum(
        arrival.gpu_fraction(shards_per_gpu, whole_gpus_only=whole_gpus_only) * arrival.minutes / 60
        for arrival in arrivals
    )


@dataclass
class Run:
    """One run of a job as Slurm accounted it (a requeued job has several), in seconds from the
    day's start on the wall clock."""

    arrival: Arrival
    start: float | None
    end: float | None
    state: str


def overlap(start: float, end: float, low: float, high: float) -> float:
    return max(0.0, min(end, high) - max(start, low))
