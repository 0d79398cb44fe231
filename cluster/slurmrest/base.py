"""The seam between the HTTP client and a data_parser version's JSON.

An adapter knows a version's paths and field shapes and nothing about HTTP; it is pure,
so it is tested on payloads captured from the real daemon (tests/payloads/).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from cluster.types import (
    AccountingRecord,
    Job,
    JobStateEntry,
    JobSubmission,
    Node,
    Partition,
    Reservation,
)

Json = dict[str, Any]


class ApiAdapter(ABC):
    version: str

    # --- paths -------------------------------------------------------------------------
    def slurm_path(self, rest: str) -> str:
        return f"/slurm/{self.version}/{rest}"

    def slurmdb_path(self, rest: str) -> str:
        return f"/slurmdb/{self.version}/{rest}"

    # --- requests ----------------------------------------------------------------------
    @abstractmethod
    def encode_submission(self, submission: JobSubmission) -> Json: ...

    # --- responses ---------------------------------------------------------------------
    @abstractmethod
    def decode_job_states(self, payload: Json) -> list[JobStateEntry]: ...

    @abstractmethod
    def decode_jobs(self, payload: Json) -> list[Job]: ...

    @abstractmethod
    def decode_submitted_job_id(self, payload: Json) -> int: ...

    @abstractmethod
    def decode_nodes(self, payload: Json) -> list[Node]: ...

    @abstractmethod
    def decode_partitions(self, payload: Json) -> list[Partition]: ...

    @abstractmethod
    def decode_reservations(self, payload: Json) -> list[Reservation]: ...

    @abstractmethod
    def decode_accounting(self, payload: Json) -> list[AccountingRecord]: ...
