"""The heatmap's data: every GPU of every node, in three queries whatever the pool's size,
as compact arrays (a 10,000-GPU pool is about 200 KB of JSON).

Built once for everyone, then cut per viewer: `shared_heatmap()` is the viewer-independent
picture (every job holding GPUs, with its owner), kept in the shared cache for
HEATMAP_CACHE_SECONDS and built by one request even when many miss together (the others wait
for it); `heatmap_payload()` hides the jobs the viewer may not see. Building costs ~290 ms at
10,000 GPUs; cutting, a few ms, so 100 people watching cost one build per interval.
"""

from __future__ import annotations

import time

from django.conf import settings
from django.core.cache import caches
from django.utils import timezone

from cluster.actions import further_nodes
from cluster.clusters.registry import primary_cluster_name
from cluster.models import Node
from foundation.templatetags.node_states import state_words
from jobs.models import Job
from telemetry.models import GpuLatest, cluster_key

# Per node: "c" its cluster, "n" name, "t" GPU type, "s" Slurm's state, "w" it in words, "r" reason,
# "g" its GPUs: [compute %, memory bandwidth %, memory used %, job reference, seconds since sample]
# job reference: -1 idle, -2 in use by someone the viewer may not see, >= 0 index into "jobs".
IDLE, HIDDEN = -1, -2
NO_SAMPLE = -1
CACHE_KEY = "gpupool:heatmap:shared"
BUILD_LOCK_KEY = "gpupool:heatmap:building"
# How long the waiters wait for another request's build before building it themselves.
WAIT_FOR_BUILD_SECONDS = 5.0


def _holders(cluster: str | None) -> dict[tuple[str, int], Job]:
    holders: dict[tuple[str, int], Job] = {}
    running = Job.objects.on_cluster(cluster).filter(state="RUNNING").exclude(gpu_allocation={})
    for job in running.select_related("owner"):
        for node, indexes in job.gpu_allocation.items():
            for index in indexes:
                holders[(node, index)] = job
    return holders


class _JobSlots:
    """The payload's "jobs" list, each job once, and its index for the GPUs it holds."""

    def __init__(self):
        self.jobs: list[dict] = []
        self._slots: dict[int, int] = {}

    def reference(self, holder: Job | None) -> int:
        if holder is None:
            return IDLE
        if holder.pk not in self._slots:
            self._slots[holder.pk] = len(self.jobs)
            self.jobs.append(
                {
                    "id": holder.pk,
                    "slurm": holder.slurm_job_id,
                    "name": holder.name,
                    "user": holder.owner.username if holder.owner else holder.cluster_user,
                    "owner": holder.owner_id,
                }
            )
        return self._slots[holder.pk]


def build_shared_heatmap() -> dict:
    """Every GPU with its last sample and the job holding it (a reference into "jobs", which
    carries each job's owner id), whoever may look; the portal's own cluster's nodes first, then
    each further cluster's that takes jobs (its nodes as its mirror pass last read them, left out
    when that was too long ago to be true now: cluster/actions/further_nodes.py)."""
    now = timezone.now()
    own = primary_cluster_name()
    further = further_nodes.shown_clusters()
    keys = [cluster_key(None), *(cluster_key(name) for name in further)]
    latest = {(row.cluster, row.node, row.index): row for row in GpuLatest.all_clusters.filter(cluster__in=keys)}
    slots = _JobSlots()
    sources: set[str] = set()
    nodes = []
    for cluster, rows in [(None, Node.objects.all()), *((name, further_nodes.nodes_of(name, now)) for name in further)]:
        rows = list(rows)
        if not rows:
            continue
        holders = _holders(cluster)
        key = cluster_key(cluster)
        for node in rows:
            gpus = []
            position = 0
            for group in node.gpus:
                used = set(group["used_indexes"])
                for _ in range(group["count"]):
                    index = position
                    position += 1
                    holder = holders.get((node.name, index))
                    if holder is not None:
                        reference = slots.reference(holder)
                    else:
                        # A further cluster's GPU Slurm counts as used without a job the portal
                        # mirrors is someone else's there; the portal's own mirror sees every job.
                        reference = HIDDEN if cluster is not None and index in used else IDLE
                    sample = latest.get((key, node.name, index))
                    if sample is None:
                        gpus.append([NO_SAMPLE, NO_SAMPLE, NO_SAMPLE, reference, NO_SAMPLE])
                        continue
                    sources.add(sample.source)
                    total = sample.memory_total_mb
                    memory_used = round(100 * sample.memory_used_mb / total) if total else 0
                    sampled = sample.time.timestamp()  # the age is per viewer: the picture is reused
                    gpus.append(
                        [round(sample.compute_util), round(sample.memory_util), memory_used, reference, sampled]
                    )
            raw_state = node.state + (f"+{node.state_flags}" if node.state_flags else "")
            nodes.append(
                {
                    "c": cluster or own,
                    "n": node.name,
                    "t": node.gpu_type,
                    "s": raw_state,
                    "w": state_words(node.state, node.state_flags),
                    "r": node.reason,
                    "g": gpus,
                }
            )
    return {"generated": now.isoformat(), "own": own, "sources": sorted(sources), "nodes": nodes, "jobs": slots.jobs}


def shared_heatmap() -> dict:
    """`build_shared_heatmap()` through the shared cache: at most one build per
    HEATMAP_CACHE_SECONDS, whatever the number of viewers."""
    cache = caches[settings.HEATMAP_CACHE]
    cached = cache.get(CACHE_KEY)
    if cached is not None:
        return cached
    # One builder: cache.add is atomic (SET NX on Redis); the lock expires if its holder dies.
    if not cache.add(BUILD_LOCK_KEY, 1, timeout=30):
        deadline = time.monotonic() + WAIT_FOR_BUILD_SECONDS
        while time.monotonic() < deadline:
            time.sleep(0.02)
            cached = cache.get(CACHE_KEY)
            if cached is not None:
                return cached
        # The builder is slow or gone: build it here rather than keep the viewer waiting.
    try:
        built = build_shared_heatmap()
        cache.set(CACHE_KEY, built, timeout=settings.HEATMAP_CACHE_SECONDS)
        return built
    finally:
        cache.delete(BUILD_LOCK_KEY)


def heatmap_payload(viewer, *, is_admin: bool, shared: dict | None = None) -> dict:
    """What `viewer` sees: every GPU, but only their own jobs named (all jobs for admins).
    `shared` is a `shared_heatmap()` (the view passes the cached one); None builds afresh."""
    shared = build_shared_heatmap() if shared is None else shared
    now = time.time()
    visible: dict[int, int] = {}
    jobs = []
    for slot, job in enumerate(shared["jobs"]):
        if is_admin or job["owner"] == viewer.pk:
            visible[slot] = len(jobs)
            named = {key: job[key] for key in ("id", "slurm", "name", "user")}
            jobs.append(named | {"mine": job["owner"] == viewer.pk})
    nodes = []
    for node in shared["nodes"]:
        cells = []
        for compute, memory, used, reference, sampled in node["g"]:
            if reference >= 0:
                reference = visible.get(reference, HIDDEN)
            age = NO_SAMPLE if sampled == NO_SAMPLE else max(0, int(now - sampled))
            cells.append([compute, memory, used, reference, age])
        nodes.append({**node, "g": cells})
    own = shared.get("own", "")
    return {"generated": shared["generated"], "own": own, "sources": shared["sources"], "nodes": nodes, "jobs": jobs}
