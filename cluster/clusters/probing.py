"""Is each cluster answering? One probe per cluster of cluster/clusters/registry.py, all at once (a
cluster that hangs never delays another's), every CLUSTER_PROBE_INTERVAL_SECONDS (beat,
cluster.tasks.probe_clusters). A probe is slurmrestd's ping, which also says whether slurmctld
answers slurmrestd; the release and REST version come from the daemon's OpenAPI document,
read once per process (cluster/clusters/services.py). The outcome goes on the cluster's ClusterStatus
row: pages and `/api/v1/clusters/` show a cluster that stopped answering as "stale since" its
last answer."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db.models import Value
from django.db.models.functions import Coalesce
from django.utils import timezone

from cluster.clusters.registry import ClusterConfig, all_clusters
from cluster.clusters.services import api_version, rest_client, served_api
from cluster.errors import SlurmError
from cluster.models import ClusterStatus

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeResult:
    name: str
    answering: bool
    slurm_release: str = ""
    api_version: str = ""
    error: str = ""


def probe(config: ClusterConfig) -> ProbeResult:
    name = None if config.primary else config.name
    try:
        served = served_api(name, timeout=settings.CLUSTER_PROBE_TIMEOUT_SECONDS)
        version = api_version(name)
        responding = rest_client(cluster=name, timeout=settings.CLUSTER_PROBE_TIMEOUT_SECONDS).ping()
    except SlurmError as exc:
        return ProbeResult(config.name, False, error=str(exc)[:2000])
    except Exception as exc:  # one cluster's surprise must not keep the others' outcome unrecorded
        log.exception("probing cluster %s failed", config.name)
        return ProbeResult(config.name, False, error=f"the probe failed: {exc}"[:2000])
    if not responding:
        return ProbeResult(config.name, False, served.release or "", version, "slurmrestd answers; slurmctld does not")
    return ProbeResult(config.name, True, served.release or "", version)


def record(result: ProbeResult) -> None:
    now = timezone.now()
    ClusterStatus.objects.get_or_create(name=result.name)
    rows = ClusterStatus.objects.filter(name=result.name)
    if result.answering:
        rows.update(
            answering=True,
            last_answer_at=now,
            failing_since=None,
            last_error="",
            checked_at=now,
            slurm_release=result.slurm_release,
            api_version=result.api_version,
        )
        return
    changed = rows.filter(answering=True).update(answering=False)
    if changed:
        log.warning("cluster %s stopped answering: %s", result.name, result.error)
    more = {"slurm_release": result.slurm_release, "api_version": result.api_version} if result.slurm_release else {}
    rows.update(failing_since=Coalesce("failing_since", Value(now)), last_error=result.error, checked_at=now, **more)


def due(clusters, now) -> list[ClusterConfig]:
    """Every cluster that answered at its last probe; one that did not, only every
    CLUSTER_PROBE_FAILING_INTERVAL_SECONDS: a cluster that hangs would otherwise hold one of
    the worker's processes for its timeout at every tick, and is stale already."""
    pause = timedelta(seconds=settings.CLUSTER_PROBE_FAILING_INTERVAL_SECONDS)
    resting = set(
        ClusterStatus.objects.filter(
            answering=False, failing_since__isnull=False, checked_at__gt=now - pause
        ).values_list("name", flat=True)
    )
    return [cluster for cluster in clusters if cluster.name not in resting]


def probe_all() -> list[ProbeResult]:
    clusters = all_clusters()
    probed = due(clusters, timezone.now())
    with ThreadPoolExecutor(max_workers=max(1, len(probed)), thread_name_prefix="cluster-probe") as pool:
        results = list(pool.map(probe, probed))
    for result in results:
        record(result)
    # Rows of clusters no longer configured go: the API lists what the portal talks to.
    ClusterStatus.objects.exclude(name__in=[cluster.name for cluster in clusters]).delete()
    return results
