"""Query-count baselines for the busiest pages: the count may not grow with the rows shown
(no N+1), and a change to it is a decision, made by editing BASELINE here."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from cluster.models import Node
from jobs.models import Job
from telemetry.models import GpuLatest

pytestmark = pytest.mark.django_db

# Queries per request, with the session and user lookups of a signed-in page included.
# job_page: +1 for the job's usage records (its cost, billing/costs.py); a running job that
# holds GPUs adds a fixed few more for its estimate (billing/tests/test_costs.py); +1 for the
# dataset versions it mounts (one more when it mounts any). node_page: +1 for the node's
# dataset copies (one more, who may read them, when it holds any), +1 for the pins among them.
# Every page: +1 for whether a cluster is not answering (the banner, cluster/records/queries.py),
# +1 for maintenance announced within a day (the banner, console/actions/maintenance.py).
BASELINE = {"job_list": 6, "job_page": 8, "heatmap_json": 6, "node_page": 11}


def _pool(owner, *, nodes: int, jobs_per_node: int):
    now = timezone.now()
    for n in range(nodes):
        name = f"gpu-a100-{n:02d}"
        Node.objects.create(
            name=name, state="MIXED", gpus=[{"type": "a100", "count": 4, "used_indexes": list(range(jobs_per_node))}]
        )
        for index in range(4):
            GpuLatest.objects.create(
                node=name, index=index, uuid=f"GPU-{n}-{index}", time=now, compute_util=50, memory_util=40,
                memory_used_mb=1000, memory_total_mb=40960, temperature_c=50, power_w=200,
            )  # fmt: skip
        for j in range(jobs_per_node):
            Job.objects.create(
                owner=owner, slurm_job_id=10_000 * (n + 1) + j, state="RUNNING", name=f"j{n}-{j}", nodes=name,
                gpu_allocation={name: [j]}, start_time=now - timedelta(minutes=5), gpu_type="a100", quota_gpus=1,
                spec={"image": "x"},
            )  # fmt: skip


def _count(client, url) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200, url
    return len(queries)


@pytest.mark.parametrize("size", [(1, 1), (6, 4)], ids=["small", "large"])
def test_query_counts_do_not_grow_with_the_rows(admin_user, client, size):
    nodes, jobs_per_node = size
    _pool(admin_user, nodes=nodes, jobs_per_node=jobs_per_node)
    client.force_login(admin_user)
    job = Job.objects.filter(owner=admin_user).first()
    counts = {
        "job_list": _count(client, "/jobs/"),
        "job_page": _count(client, f"/jobs/{job.pk}/"),
        "heatmap_json": _count(client, "/console/heatmap.json"),
        "node_page": _count(client, "/console/nodes/gpu-a100-00/"),
    }
    assert counts == BASELINE
