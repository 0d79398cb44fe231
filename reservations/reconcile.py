"""Drift between the portal's reservations and Slurm's, and its repair.

The portal owns the Slurm reservations named <RESERVATION_NAME_PREFIX><id>. Drift is:
- a held reservation (approved or active, window not over) missing in Slurm (deleted by hand);
- one of ours in Slurm with no held reservation behind it (made by hand, or left by a
  cancellation that did not finish);
- one whose GPUs, window or users differ from the row.
`repair` recreates, deletes or re-makes what the portal owns; nothing else is touched.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from cluster.clusters.services import rest_client, slurm_cli
from cluster.commands.cli import SlurmCli
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.records.gres import parse_tres
from cluster.records.types import Reservation as SlurmReservation
from reservations.actions import cluster_users
from reservations.models import HOLDING, Reservation


@dataclass(frozen=True)
class Drift:
    name: str
    problem: str  # "missing in Slurm", "not the portal's", "different"
    detail: str
    reservation_id: int | None = None

    def __str__(self):
        return f"{self.name}: {self.problem} ({self.detail})"


def _ours(slurm: list[SlurmReservation]) -> dict[str, SlurmReservation]:
    return {held.name: held for held in slurm if held.name.startswith(settings.RESERVATION_NAME_PREFIX)}


def _differences(row: Reservation, held: SlurmReservation) -> list[str]:
    found = []
    tres = parse_tres(held.tres)
    if tres.get(f"gres/gpu:{row.gpu_type}") != row.gpu_count:
        found.append(f"GPUs {held.tres} instead of gres/gpu:{row.gpu_type}={row.gpu_count}")
    if held.start_time != row.start or held.end_time != row.end:
        found.append(f"window {held.start_time}..{held.end_time} instead of {row.start}..{row.end}")
    users = cluster_users(row)
    if sorted(held.users) != users:
        found.append(f"users {','.join(held.users)} instead of {','.join(users)}")
    return found


def check(slurm: list[SlurmReservation] | None = None) -> list[Drift]:
    slurm = rest_client().list_reservations() if slurm is None else slurm
    ours = _ours(slurm)
    now = timezone.now()
    held_rows = {
        row.slurm_name: row for row in Reservation.objects.filter(state__in=HOLDING, end__gt=now).exclude(slurm_name="")
    }
    drift = []
    for name, row in sorted(held_rows.items()):
        if name not in ours:
            drift.append(Drift(name, "missing in Slurm", f"reservation #{row.pk} is {row.state}", row.pk))
        else:
            differences = _differences(row, ours[name])
            if differences:
                drift.append(Drift(name, "different", "; ".join(differences), row.pk))
    for name in sorted(set(ours) - set(held_rows)):
        drift.append(Drift(name, "not the portal's", "no approved or active reservation behind it"))
    return drift


def repair(drift: list[Drift], *, noop: bool = False) -> list[list[str]]:
    """Make Slurm hold what the portal approved; returns the commands (run, or only listed)."""
    base = slurm_cli()
    cli = SlurmCli(prefix=base.prefix, noop=True, timeout=base.timeout) if noop else base
    start = len(cli.executed)
    for item in drift:
        if item.problem in ("not the portal's", "different"):
            cli.delete_reservation(item.name, check=False)
        if item.problem in ("missing in Slurm", "different"):
            row = Reservation.objects.get(pk=item.reservation_id)
            begin = max(row.start, timezone.now().replace(second=0, microsecond=0))
            cli.create_gpu_reservation(
                GpuReservationRequest(
                    item.name,
                    gpu_type=row.gpu_type,
                    count=row.gpu_count,
                    users=cluster_users(row),
                    start=begin if begin > row.start else row.start,
                    duration_minutes=max(1, int((row.end - begin).total_seconds() // 60)),
                )
            )
    return cli.executed[start:]
