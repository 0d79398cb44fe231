"""The seam between the HTTP client and a data_parser version's JSON.

An adapter knows a version's paths and field shapes and nothing about HTTP; it is pure,
so it is tested on payloads captured from the real daemon (tests/payloads/).
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any

from cluster.commands.reservation_request import GpuReservationRequest
from cluster.records.types import (
    AccountingRecord,
    Job,
    JobStateEntry,
    JobSubmission,
    Node,
    Partition,
    Reservation,
)

Json = dict[str, Any]


_VERSION = re.compile(r"v\d+\.\d+\.\d+")
_SLURM_PATH = re.compile(r"^/slurm(?:db)?/(v\d+\.\d+\.\d+)/")


@dataclass(frozen=True)
class ServedApi:
    """What a slurmrestd serves: its Slurm release and its data_parser versions."""

    release: str
    versions: tuple[str, ...]


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.lstrip("v").split("."))


def parse_openapi(document: Json) -> ServedApi:
    """`GET /openapi/v3`: 26.05 lists its parsers in `info.x-slurm.data_parsers`; 24.11 has no
    such key, so the versions are also read from the paths (`/slurm/v0.0.41/jobs/`). The
    release is in `info.version` ("Slurm-24.11.5&openapi/slurmctld&...")."""
    info = document.get("info") or {}
    found = set(_VERSION.findall(json.dumps((info.get("x-slurm") or {}).get("data_parsers", []))))
    for path in document.get("paths") or {}:
        match = _SLURM_PATH.match(path)
        if match:
            found.add(match.group(1))
    release_match = re.search(r"Slurm-([\w.]+)", str(info.get("version", "")))
    release = (info.get("x-slurm") or {}).get("release") or (release_match.group(1) if release_match else "")
    if isinstance(release, dict):  # {"major", "minor", "micro"} where a release is structured
        release = ".".join(str(release.get(part, "")) for part in ("major", "minor", "micro"))
    return ServedApi(release=str(release), versions=tuple(sorted(found, key=version_key)))


class ApiAdapter(ABC):
    version: str
    # Whether reservations can be created and deleted over REST (v0.0.43+); else scontrol.
    reservation_writes: bool = False

    # --- paths -------------------------------------------------------------------------
    def slurm_path(self, rest: str) -> str:
        return f"/slurm/{self.version}/{rest}"

    def slurmdb_path(self, rest: str) -> str:
        return f"/slurmdb/{self.version}/{rest}"

    # --- requests ----------------------------------------------------------------------
    @abstractmethod
    def encode_submission(self, submission: JobSubmission) -> Json: ...

    def encode_gpu_reservation(self, request: GpuReservationRequest) -> Json:
        raise NotImplementedError(f"slurmrestd {self.version} cannot create reservations")

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

    @abstractmethod
    def decode_controller_responding(self, payload: Json) -> bool: ...

    def decode_cancel_refusals(self, payload: Json) -> list[tuple[int, str]]:
        """(error code, Slurm's words) per job a cancel did not reach, from `status[]`: the
        bulk `DELETE /jobs/` (every version) and v0.0.42+'s single DELETE answer 200 with
        `errors: []` and put each job's outcome there (2002 refused, 2017 no such job, 2021
        already done); an empty list is success."""
        refusals = []
        for status in payload.get("status") or []:
            error = status.get("error") or {}
            code = int(error.get("code", 0) or 0)
            if code:
                refusals.append((code, str(error.get("message") or error.get("string") or "")))
        return refusals
