"""The heatmap's data: every GPU of every node, in three queries whatever the pool's size,
as compact arrays (a 10,000-GPU pool is about 200 KB of JSON)."""

from __future__ import annotations

from django.utils import timezone

from cluster.models import Node
from jobs.models import Job
from telemetry.models import GpuLatest

# Per GPU: [compute %, memory bandwidth %, memory used %, job reference, seconds since sample]
# job reference: -1 idle, -2 in use by someone the viewer may not see, >= 0 index into "jobs".
IDLE, HIDDEN = -1, -2
NO_SAMPLE = -1


def heatmap_payload(viewer, *, is_admin: bool) -> dict:
    now = timezone.now()
    latest = {(row.node, row.index): row for row in GpuLatest.objects.all()}
    holders: dict[tuple[str, int], Job] = {}
    for job in Job.objects.filter(state="RUNNING").exclude(gpu_allocation={}).select_related("owner"):
        for node, indexes in job.gpu_allocation.items():
            for index in indexes:
                holders[(node, index)] = job
    jobs: list[dict] = []
    job_slots: dict[int, int] = {}
    sources: set[str] = set()
    nodes = []
    for node in Node.objects.all():
        gpus = []
        position = 0
        for group in node.gpus:
            for _ in range(group["count"]):
                index = position
                position += 1
                sample = latest.get((node.name, index))
                holder = holders.get((node.name, index))
                if holder is None:
                    reference = IDLE
                elif is_admin or holder.owner_id == viewer.pk:
                    if holder.pk not in job_slots:
                        job_slots[holder.pk] = len(jobs)
                        jobs.append(
                            {
                                "id": holder.pk,
                                "slurm": holder.slurm_job_id,
                                "name": holder.name,
                                "user": holder.owner.username if holder.owner else holder.cluster_user,
                                "mine": holder.owner_id == viewer.pk,
                            }
                        )
                    reference = job_slots[holder.pk]
                else:
                    reference = HIDDEN
                if sample is None:
                    gpus.append([NO_SAMPLE, NO_SAMPLE, NO_SAMPLE, reference, NO_SAMPLE])
                    continue
                sources.add(sample.source)
                used = round(100 * sample.memory_used_mb / sample.memory_total_mb) if sample.memory_total_mb else 0
                age = max(0, int((now - sample.time).total_seconds()))
                gpus.append([round(sample.compute_util), round(sample.memory_util), used, reference, age])
        nodes.append(
            {
                "n": node.name,
                "t": node.gpus[0]["type"] if node.gpus else "",
                "s": node.state + (f"+{node.state_flags}" if node.state_flags else ""),
                "r": node.reason,
                "g": gpus,
            }
        )
    return {"generated": now.isoformat(), "sources": sorted(sources), "nodes": nodes, "jobs": jobs}
