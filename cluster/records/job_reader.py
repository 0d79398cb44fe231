"""Reading Slurm's jobs for the mirror: every way, in one place.

- the state listing (`SlurmRestClient.list_job_states`: ids and states only, cheap at
  thousands), read by the caller every pass;
- details by id (`fetch_jobs`), a few requests at once, never the full `/jobs` list, which
  grows slurmrestd by gigabytes at thousands of jobs;
- details of a burst of new pending jobs, and of the pending jobs someone watches, in bulk
  (`JobReader.new_pending`, `JobReader.pending`), one `squeue` run per thousands
  (cluster/commands/queue.py), when the CLI is reachable; after a failure squeue rests for
  QUEUE_RETRY_AFTER seconds (a stalled login node would otherwise cost every pass its timeout)
  and those jobs are fetched by id.

Knows no product: which jobs to read and what to write is the caller's (jobs/mirror/).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from django.conf import settings

from cluster.commands.cli import SlurmCli
from cluster.commands.queue import pending_job_details
from cluster.errors import SlurmError, SlurmNotFound
from cluster.records.types import Job
from cluster.slurmrest.client import SlurmRestClient
from foundation.sequences import batches

log = logging.getLogger(__name__)

# Details fetched by id this many per batch (each batch concurrently).
FETCH_BATCH = 200
# Bulk-read batches handed to the caller at once.
READ_BATCH = 500
QUEUE_TIMEOUT_SECONDS = 10.0
QUEUE_RETRY_AFTER = 60.0
# Fewer new pending jobs than this are fetched by id: a squeue run costs ~10 ms on the dev
# cluster and far more behind an ssh prefix, a few fetches by id less.
QUEUE_MIN_JOBS = 20


def fetch_jobs(client: SlurmRestClient, job_ids: Sequence[int]) -> list[Job]:
    """The details of `job_ids`, one request each, MIRROR_FETCH_CONCURRENCY at a time. Jobs
    purged between the listing and the fetch are left out (the caller finishes them from
    slurmdbd)."""

    def fetch(job_id: int) -> Job | None:
        try:
            return client.get_job(job_id)
        except SlurmNotFound:
            return None

    if len(job_ids) <= 1:
        found = [fetch(job_id) for job_id in job_ids]
    else:
        with ThreadPoolExecutor(max_workers=min(settings.MIRROR_FETCH_CONCURRENCY, len(job_ids))) as pool:
            found = list(pool.map(fetch, job_ids))
    return [job for job in found if job is not None]


@dataclass
class QueueBackoff:
    """When squeue may be asked again after it failed; one per process (module-level below),
    since every pass of a worker meets the same login node."""

    unavailable_until: float = 0.0

    def resting(self) -> bool:
        return time.monotonic() < self.unavailable_until

    def failed(self) -> None:
        self.unavailable_until = time.monotonic() + QUEUE_RETRY_AFTER

    def reset(self) -> None:
        self.unavailable_until = 0.0


QUEUE_BACKOFF = QueueBackoff()


@dataclass
class JobReader:
    """One pass's reader: the REST client and, when the CLI is at hand, squeue for bursts."""

    client: SlurmRestClient
    queue: SlurmCli | None = None
    # The process-wide back-off: every pass of a worker meets the same login node.
    backoff: QueueBackoff = field(default_factory=lambda: QUEUE_BACKOFF)

    def new_pending(self, live_states: Mapping[int, tuple[str, ...]]) -> dict[int, Job]:
        """Details of new pending jobs (id -> states from the listing) from squeue in bulk;
        {} without a CLI, for a handful of jobs, while squeue rests, or when it fails (logged)."""
        return self.pending(live_states, at_least=QUEUE_MIN_JOBS)

    def pending(self, live_states: Mapping[int, tuple[str, ...]], *, at_least: int = 1) -> dict[int, Job]:
        """What squeue says of these pending jobs, in one run per thousands; {} without a CLI,
        for fewer than `at_least`, while squeue rests, or when it fails (logged): the caller
        fetches those by id."""
        if self.queue is None or len(live_states) < max(at_least, 1) or self.backoff.resting():
            return {}
        queue = replace(self.queue, timeout=min(self.queue.timeout, QUEUE_TIMEOUT_SECONDS))
        try:
            return pending_job_details(queue, live_states)
        except (SlurmError, OSError, ValueError) as exc:
            self.backoff.failed()
            log.warning("squeue could not read %s pending jobs, fetching them by id: %s", len(live_states), exc)
            return {}

    def detail_batches(self, read: Mapping[int, Job], to_fetch: Iterable[int]) -> Iterator[list[Job]]:
        """Batches of details: the ones already read in bulk, then the rest fetched by id."""
        for batch in batches(list(read.values()), READ_BATCH):
            yield list(batch)
        for batch in batches([job_id for job_id in to_fetch if job_id not in read], FETCH_BATCH):
            yield fetch_jobs(self.client, batch)
