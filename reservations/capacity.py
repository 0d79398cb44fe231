"""How many GPUs of a type are free for a window: the type's GPUs per node (the node mirror)
minus what approved reservations and maintenance holds take in that window.

Per node, because a reservation's GPUs sit on nodes: an approved reservation counts on the
nodes Slurm chose for it (recorded at approval), or, before that is known, on the nodes with
the most room. A GPU reservation takes every core of its nodes in Slurm, so it takes those
nodes whole (a 1-GPU reservation leaves its node's other GPUs to nobody), as a maintenance
hold (the GPU-reset flow's MAINT reservation) does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cluster.models import Node
from cluster.records.hostlist import expand_hostlist
from cluster.records.types import Reservation as SlurmReservation
from reservations.models import HOLDING, Reservation


@dataclass(frozen=True)
class Availability:
    gpu_type: str
    capacity: int  # GPUs of the type in the pool
    free: int  # of those, not promised in the window
    per_node_free: dict[str, int] = field(default_factory=dict)


def gpus_per_node(gpu_type: str) -> dict[str, int]:
    nodes = {}
    for name, groups in Node.objects.values_list("name", "gpus"):
        count = sum(int(group["count"]) for group in groups or [] if group.get("type") == gpu_type)
        if count:
            nodes[name] = count
    return nodes


def overlapping(gpu_type: str, start: datetime, end: datetime, *, exclude_pk: int | None = None):
    rows = Reservation.objects.filter(gpu_type=gpu_type, state__in=HOLDING, start__lt=end, end__gt=start)
    return rows.exclude(pk=exclude_pk) if exclude_pk else rows


def availability(
    gpu_type: str,
    start: datetime,
    end: datetime,
    *,
    exclude_pk: int | None = None,
    maintenance: list[SlurmReservation] = (),
) -> Availability:
    reservations = overlapping(gpu_type, start, end, exclude_pk=exclude_pk).order_by("start", "id")
    return free_in(gpu_type, gpus_per_node(gpu_type), list(reservations), maintenance, start, end)


def free_in(
    gpu_type: str,
    per_node: dict[str, int],
    reservations: list[Reservation],
    maintenance: list[SlurmReservation],
    start: datetime,
    end: datetime,
) -> Availability:
    """The rule itself, over rows already read: what `per_node` GPUs are free in [start, end)
    once the holding `reservations` (in start order) and the MAINT holds that overlap it are
    taken. The calendar calls it for each hour of a week with one read of the rows."""
    free = dict(per_node)
    for hold in maintenance:
        if "MAINT" in hold.flags and _overlaps(hold, start, end):
            for node in expand_hostlist(hold.nodes):
                if node in free:
                    free[node] = 0
    for reservation in reservations:
        if reservation.state in HOLDING and reservation.start < end and reservation.end > start:
            _take(free, reservation.gpu_count, expand_hostlist(reservation.nodes))
    return Availability(gpu_type, sum(per_node.values()), sum(free.values()), free)


def free_by_hour(
    gpu_type: str,
    per_node: dict[str, int],
    reservations: list[Reservation],
    maintenance: list[SlurmReservation],
    start: datetime,
    *,
    days: int,
) -> list[int]:
    """GPUs free in each hour from `start` for `days` days (the calendar's grid): `free_in`
    for every hour, over rows read once."""
    hour = timedelta(hours=1)
    return [
        free_in(gpu_type, per_node, reservations, maintenance, start + n * hour, start + (n + 1) * hour).free
        for n in range(days * 24)
    ]


def _take(free: dict[str, int], count: int, preferred: list[str]) -> None:
    """Take the nodes that hold `count` GPUs: those Slurm chose, else those with most room.
    A GPU reservation takes every core of its node (notes/slurm-26.05.md, seen on 24.11
    too), so no other job or reservation starts on it, even on its other GPUs: each node it
    touches is taken whole."""
    chosen = [node for node in preferred if node in free]
    if not chosen:
        for node in sorted(free, key=lambda node: -free[node]):
            if count <= 0:
                break
            if free[node]:
                chosen.append(node)
                count -= free[node]
    for node in chosen:
        free[node] = 0


def _overlaps(hold: SlurmReservation, start: datetime, end: datetime) -> bool:
    if hold.start_time is None or hold.end_time is None:
        return True  # an open-ended hold holds now and later
    return hold.start_time < end and hold.end_time > start


def nearest_free_starts(
    gpu_type: str,
    count: int,
    start: datetime,
    duration: timedelta,
    *,
    step: timedelta,
    horizon: timedelta,
    maintenance: list[SlurmReservation] = (),
    wanted: int = 3,
) -> list[datetime]:
    """Up to `wanted` starts on the grid after `start`, within `horizon`, where `count` GPUs are free."""
    found, moment = [], start + step
    while moment <= start + horizon and len(found) < wanted:
        if availability(gpu_type, moment, moment + duration, maintenance=maintenance).free >= count:
            found.append(moment)
        moment += step
    return found
