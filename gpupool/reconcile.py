"""After a restore: what happened since the backup, re-derived from Slurm's own accounting.

A database restored from a backup knows nothing of the jobs submitted after it, and still shows the
jobs of that moment in the state they had then. Slurm kept going, and slurmdbd recorded every job. For
each cluster that takes jobs, `reconcile(since)` reads slurmdbd's records from `since` on and:

- runs one mirror pass: it moves every row the backup froze (a job no longer in slurmctld is settled
  from its accounting record, as always) and gives a row back to each job slurmctld still holds that
  the database lost, under its portal id (its comment; jobs/mirror/rows.py);
- gives back a row to each job only slurmdbd still knows (by its Slurm id on that cluster), with its
  portal id where slurmdbd kept the job's comment (AccountingStoreFlags=job_comment) and its owner and
  group by its Slurm user and account. Array tasks are left to their sweep (its rows are not in the
  backup); their usage is still metered below;
- meters the records: the usage records and charges written since the backup come back under the same
  keys (billing/usage/metering.py: a run is written once per key, whatever the window).

Every step is idempotent: reconcile twice, or over a longer window, and nothing doubles.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from billing.usage.metering import meter_records
from cluster.clusters.registry import all_clusters
from cluster.clusters.services import rest_client
from cluster.errors import SlurmError
from cluster.records.accounting import gpus_by_type
from cluster.records.types import AccountingRecord
from groups.queries import group_ids_for_accounts
from jobs.mirror.passes import mirror_jobs
from jobs.mirror.rows import portal_state
from jobs.models import Job
from jobs.protocol import portal_uuid_of
from jobs.tasks import run_further_sync

log = logging.getLogger(__name__)


@dataclass
class ClusterReconciled:
    records: int = 0
    jobs_recreated: int = 0
    array_tasks_left: int = 0
    usage_written: int = 0
    charged: int = 0
    error: str = ""


@dataclass
class ReconcileResult:
    since: datetime
    clusters: dict[str, ClusterReconciled] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not any(found.error for found in self.clusters.values())

    def summary(self) -> str:
        lines = [f"reconciled from {self.since:%Y-%m-%d %H:%M:%S} UTC:"]
        for name, found in self.clusters.items():
            if found.error:
                lines.append(f"  {name}: not reconciled: {found.error}")
                continue
            lines.append(
                f"  {name}: {found.records} accounting records, {found.jobs_recreated} jobs given back their row, "
                f"{found.array_tasks_left} array tasks left to their sweep, {found.usage_written} usage records "
                f"written again, {found.charged} charged"
            )
        return "\n".join(lines)


def recreate_lost_jobs(records: list[AccountingRecord], cluster: str) -> tuple[int, int]:
    """Rows for the jobs slurmdbd knows that the database does not (by Slurm id on `cluster`);
    (created, array tasks left out)."""
    singles = [record for record in records if record.array_job_id is None]
    arrays = len(records) - len(singles)
    ids = [record.job_id for record in singles]
    known = set(Job.objects.on_cluster(cluster).filter(slurm_job_id__in=ids).values_list("slurm_job_id", flat=True))
    lost = {record.job_id: record for record in singles if record.job_id not in known}
    if not lost:
        return 0, arrays
    owners = dict(
        get_user_model()
        .objects.filter(profile__cluster_username__in={record.user_name for record in lost.values()})
        .values_list("profile__cluster_username", "pk")
    )
    groups = group_ids_for_accounts({record.account for record in lost.values()})
    claimed = {portal_uuid_of(record.comment) for record in lost.values()} - {None}
    taken = set(Job.objects.filter(uuid__in=claimed).values_list("uuid", flat=True))
    rows = []
    for record in lost.values():
        portal_uuid = portal_uuid_of(record.comment)
        types = [gpu_type for gpu_type in gpus_by_type(record) if gpu_type]
        row = Job(
            cluster=cluster,
            slurm_job_id=record.job_id,
            owner_id=owners.get(record.user_name),
            group_id=groups.get(record.account),
            name=record.name,
            comment=record.comment,
            cluster_user=record.user_name,
            account=record.account,
            qos=record.qos,
            state=portal_state(record.state),
            slurm_states=",".join(record.states)[:200],
            nodes=record.ran_on[:500],
            submit_time=record.submit_time,
            start_time=record.start_time,
            end_time=record.end_time if record.is_settled else None,
            exit_code=record.exit_code if record.is_settled else None,
            elapsed_seconds=record.elapsed_seconds,
            gpu_count=record.gpu_count or None,
            gpu_type=types[0] if len(types) == 1 else "",
        )
        if portal_uuid is not None and portal_uuid not in taken:
            row.uuid = portal_uuid  # its links and its events' ids stay what the user had
        rows.append(row)
    with transaction.atomic():
        # ignore_conflicts: a mirror pass beside this one may have made some of them.
        Job.objects.bulk_create(rows, ignore_conflicts=True)
        created = Job.objects.on_cluster(cluster).filter(slurm_job_id__in=list(lost)).count()
    return created, arrays


def reconcile(since: datetime, until: datetime | None = None) -> ReconcileResult:
    until = until or timezone.now()
    result = ReconcileResult(since)
    for cluster in all_clusters():
        if not cluster.takes_jobs:
            continue
        found = result.clusters.setdefault(cluster.name, ClusterReconciled())
        try:
            client = rest_client(cluster=cluster.name)
            records = client.list_accounting(since, until)
            found.records = len(records)
            # The jobs slurmctld still holds first: its listing has every job's comment (slurmdbd
            # has a running job's only once it ends), so their rows come back under their portal ids.
            before = Job.objects.on_cluster(cluster.name).count()
            if cluster.primary:
                mirror_jobs(client)
            else:
                run_further_sync(cluster.name)
            _from_accounting, found.array_tasks_left = recreate_lost_jobs(records, cluster.name)
            found.jobs_recreated = Job.objects.on_cluster(cluster.name).count() - before
            metered = meter_records(records, cluster=cluster.name)
        except SlurmError as exc:
            log.warning("reconcile: %s could not be read: %s", cluster.name, exc)
            found.error = str(exc)[:500]
            continue
        found.usage_written, found.charged = metered.written, metered.charged
    return result
