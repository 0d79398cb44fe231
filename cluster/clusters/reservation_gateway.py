"""GPU reservations made the way the cluster allows: over REST where slurmrestd can create
them (v0.0.43+, Slurm 26.05), with `scontrol` (cluster/commands/cli.py) where it cannot (24.11).

The calls and their results are the same either way, so reservations/ never asks which.
REST writes go with the service user's token (the SlurmUser): slurmctld refuses a user's
token with 422 / 2010, and a user must never hold the right to reserve for others anyway.
Requests are checked once, as values (cluster/commands/reservation_request.py), so both paths accept
the same input.
"""

from __future__ import annotations

from datetime import UTC, datetime

from cluster.clusters.services import rest_client, slurm_cli
from cluster.commands.cli import SlurmCli
from cluster.commands.reservation_request import GpuReservationRequest, checked_name
from cluster.errors import SlurmNotFound, SlurmRequestError
from cluster.records.types import Reservation
from cluster.slurmrest.client import SlurmRestClient


class ReservationGateway:
    def __init__(self, cli: SlurmCli, service: SlurmRestClient):
        self.cli = cli
        self.service = service

    @property
    def over_rest(self) -> bool:
        """Asks the daemon which version it speaks (once per process), so only on first use.
        In noop mode (SLURM_CLI_NOOP) nothing is written: the CLI logs what it would run."""
        return not self.cli.noop and self.service.adapter.reservation_writes

    def create_gpu_reservation(self, request: GpuReservationRequest) -> None:
        """Reserve GPUs as `request` says; Slurm picks the node(s). Raises a SlurmError with
        Slurm's words when it refuses ("Requested nodes are busy", "Duplicate reservation name")."""
        if not self.over_rest:
            self.cli.create_gpu_reservation(request)
            return
        # `POST /reservation` creates OR updates: seen on 26.05, a second POST with a taken name
        # answered 200 and changed that reservation's duration. scontrol refuses a taken name,
        # and so does this. (Names are the portal's row ids, made under the row's lock.)
        if self.show_reservation(request.name) is not None:
            raise SlurmRequestError(
                f"Error creating the reservation: Duplicate reservation name ({request.name})",
                public_message="Error creating the reservation: Duplicate reservation name",
            )
        self.service.create_gpu_reservation(request.starting_by(datetime.now(UTC)))

    def create_node_reservation(self, name: str, **hold) -> None:
        """Hold whole nodes (SlurmCli.create_node_reservation's arguments: a maintenance hold by
        default), with scontrol on every generation: the REST adapters write GPU reservations only."""
        self.cli.create_node_reservation(name, **hold)

    def delete_reservation(self, name: str, *, check: bool = True) -> None:
        """`check=False` for clean-ups that may find it gone already."""
        checked_name(name)
        if not self.over_rest:
            self.cli.delete_reservation(name, check=check)
            return
        try:
            self.service.delete_reservation(name)
        except SlurmNotFound:
            if check:
                raise

    def show_reservation(self, name: str) -> Reservation | None:
        """The reservation as slurmctld holds it now, or None. Times are UTC."""
        checked_name(name)
        if not self.over_rest:
            return self.cli.show_reservation(name)
        return next((held for held in self.service.list_reservations() if held.name == name), None)


def reservation_gateway() -> ReservationGateway:
    return ReservationGateway(slurm_cli(), rest_client())
