"""How many GPUs of a type are free for a window: the type's GPUs per node (the node mirror)
minus what approved reservations and maintenance holds take in that window.

Per node, because a reservation's GPUs sit on nodes: an approved reservation counts on the
nodes Slurm chose for it (recorded at approval), or, before that is known, on the nodes with
the most room. A maintenance hold (the GPU-reset flow's MAINT reservation in Slurm) takes its
whole node.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from cluster.hostlist import expand_hostlist
from cluster.models import Node
from cluster.types import Reservation as SlurmReservation
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
    free = gpus_per_node(gpu_type)
    capacity = sum(free.values())
    for hold in maintenance:
        if "MAINT" in hold.flags and _overlaps(hold, start, end):
            for node in expand_hostlist(hold.nodes):
                free[node] = 0
    for reservation in overlapping(gpu_type, start, end, exclude_pk=exclude_pk).order_by("start", "id"):
        _take(free, reservation.gpu_count, expand_hostlist(reservation.nodes))
    return Availability(gpu_type, capacity, sum(free.values()), free)


def _take(free: dict[str, int], count: int, preferred: list[str]) -> None:
    """Take `count` GPUs: first from the nodes Slurm chose, then from those with most room."""
    order = [node for node in preferred if node in free] + sorted(
        (node for node in free if node not in preferred), key=lambda node: -free[node]
    )
    for node in order:
        taken = min(free[node], count)
        free[node] -= taken
        count -= taken
        if not count:
            return


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
