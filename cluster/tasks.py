"""The clusters' probe (cluster/clusters/probing.py), on beat every CLUSTER_PROBE_INTERVAL_SECONDS."""

from celery import shared_task

from cluster.clusters import probing


@shared_task(ignore_result=True)
def probe_clusters() -> str:
    results = probing.probe_all()
    return ", ".join(f"{result.name}: {'up' if result.answering else 'not answering'}" for result in results)
