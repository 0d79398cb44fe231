"""How well a finished job used what it asked for, told to the job page and the job API by a higher layer.

The figures come from GPU telemetry (telemetry/, above jobs/), which jobs/ must not import: as with
`jobs.costs`, telemetry registers a provider in its AppConfig.ready(), and the job serializer and the
job page ask it. A provider takes jobs all at once (a page of jobs costs a fixed number of queries)
and returns, for each job it has figures for, a dict of them (telemetry/efficiency.py says which).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jobs.models import Job

EfficiencyProvider = Callable[[list["Job"]], Mapping[int, dict]]

_provider: EfficiencyProvider | None = None


def register_efficiency_provider(provider: EfficiencyProvider) -> None:
    global _provider
    _provider = provider


def efficiencies_for(jobs: Sequence[Job]) -> Mapping[int, dict]:
    if _provider is None or not jobs:
        return {}
    return _provider(list(jobs))


def efficiency_for(job: Job) -> dict | None:
    return efficiencies_for([job]).get(job.pk)
