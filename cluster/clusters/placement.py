"""Where a job would start first: each cluster's own scheduler asked for its estimate
(`sbatch --test-only`, which runs slurmctld's scheduling for the job without submitting it;
slurmrestd has no such call), the answers compared (docs/clusters.md, "Placement").

The estimate is for a job of this shape (partitions, GPUs, time limit) asked by the cluster's
CLI user, not for the user's own priority: what differs between clusters is their queues, which
this reads. Clusters are asked at once, each in its own thread with the CLI's timeout, so one
that hangs delays the answer by that timeout and never the others' estimates.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from django.utils import timezone

from cluster.clusters.registry import ClusterConfig
from cluster.clusters.services import slurm_cli
from cluster.commands.cli import SlurmCli
from cluster.errors import SlurmError
from cluster.records.queries import clusters_not_answering

log = logging.getLogger(__name__)

# "sbatch: Job 12 to start at 2026-12-03T18:47:52 using 1 processors on nodes gpu-a100-01 in
# partition gpu" (24.11; 26.05 prints a stray word after the time, which the pattern skips).
_ESTIMATE = re.compile(
    r"to start at (?P<start>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\b.*?"
    r"(?: on nodes (?P<nodes>\S+))?(?: in partition (?P<partition>\S+))?\s*$"
)
# Estimates this close are the same start: the portal's own cluster (or the first listed) wins.
SAME_START = timedelta(minutes=1)


@dataclass(frozen=True)
class JobShape:
    partition: str  # Slurm's list, "floor,gpu"
    tres_per_node: str  # cluster.records.gres.build_tres_per_node's
    time_limit_minutes: int


@dataclass(frozen=True)
class StartEstimate:
    cluster: str
    start: datetime | None = None  # aware; None when there is no estimate
    nodes: str = ""
    partition: str = ""
    error: str = ""  # why there is none, in words a user may read


@dataclass(frozen=True)
class Placement:
    cluster: str | None  # None: no cluster can start it
    reason: str
    estimates: tuple[StartEstimate, ...]


def estimate_arguments(shape: JobShape) -> list[str]:
    """sbatch's arguments for the estimate: each is checked by SlurmCli, never a shell's word."""
    gres = ",".join(item.removeprefix("gres/") for item in shape.tres_per_node.split(",") if item)
    return [
        "sbatch",
        "--test-only",
        f"--partition={shape.partition}",
        f"--gres={gres}",
        f"--time={shape.time_limit_minutes}",
        "--job-name=placement-estimate",
        "--wrap=true",
    ]


def parse_estimate(output: str, time_zone: str) -> tuple[datetime, str, str] | None:
    """The start (in the cluster's time zone, made aware), nodes and partition from sbatch's
    answer; None when it holds no estimate."""
    for line in output.splitlines():
        found = _ESTIMATE.search(line.strip())
        if found:
            start = datetime.fromisoformat(found["start"]).replace(tzinfo=ZoneInfo(time_zone))
            return start, found["nodes"] or "", found["partition"] or ""
    return None


def _refusal(message: str) -> str:
    """sbatch's last `error:` words ("Requested node configuration is not available")."""
    words = message.rsplit("error:", 1)[-1].strip().splitlines()
    return (words[0] if words else message).strip()[:200] or "refused"


def estimate_start(cluster: ClusterConfig, shape: JobShape, cli: SlurmCli) -> StartEstimate:
    try:
        result = cli.run(*estimate_arguments(shape))
    except SlurmError as exc:
        log.info("no start estimate from %s: %s", cluster.name, exc)
        return StartEstimate(cluster.name, error=f"{cluster.name} cannot run it: {_refusal(str(exc))}")
    parsed = parse_estimate(f"{result.stderr}\n{result.stdout}", cluster.time_zone)
    if parsed is None:
        log.warning("unreadable estimate from %s: %r", cluster.name, (result.stdout + result.stderr)[:300])
        return StartEstimate(cluster.name, error=f"{cluster.name} gave no estimate")
    start, nodes, partition = parsed
    return StartEstimate(cluster.name, start=start, nodes=nodes, partition=partition)


def estimate_everywhere(
    clusters: Iterable[ClusterConfig],
    shape: JobShape,
    cli_for: Callable[[str], SlurmCli],
    not_answering: dict[str, datetime | None] | None = None,
) -> list[StartEstimate]:
    """Each cluster's estimate, in the order given, asked at once. A cluster known not to be
    answering (`not_answering`: name -> since when) is not asked: it says so instead."""
    clusters = list(clusters)
    not_answering = not_answering or {}
    asked = [cluster for cluster in clusters if cluster.name not in not_answering]
    answers: dict[str, StartEstimate] = {}
    if asked:
        with ThreadPoolExecutor(max_workers=len(asked), thread_name_prefix="placement") as pool:
            futures = {
                cluster.name: pool.submit(estimate_start, cluster, shape, cli_for(cluster.name)) for cluster in asked
            }
            answers = {name: future.result() for name, future in futures.items()}
    estimates = []
    for cluster in clusters:
        if cluster.name in answers:
            estimates.append(answers[cluster.name])
        else:
            since = not_answering[cluster.name]
            when = f" since {utc_clock(since)}" if since else ""
            estimates.append(StartEstimate(cluster.name, error=f"{cluster.name} is not answering{when}"))
    return estimates


def utc_clock(moment: datetime) -> str:
    """ "14:02 UTC": how a reason or a banner names a moment."""
    return f"{timezone.localtime(moment, ZoneInfo('UTC')):%H:%M} UTC"


def estimate_where_answering(clusters: Iterable[ClusterConfig], shape: JobShape) -> list[StartEstimate]:
    """estimate_everywhere through each cluster's own CLI, the clusters the probes see not
    answering left out (cluster/clusters/probing.py)."""
    silent = {view.name: view.stale_since for view in clusters_not_answering()}
    return estimate_everywhere(clusters, shape, slurm_cli, not_answering=silent)


def _at(moment: datetime, now: datetime) -> str:
    return "now" if moment <= now + SAME_START else f"at {utc_clock(moment)}"


def choose(estimates: Iterable[StartEstimate], own: str, now: datetime | None = None) -> Placement:
    """The earliest expected start; within SAME_START of it, the portal's own cluster, then the
    first listed. The reason names the others' estimates, as the user reads it."""
    estimates = tuple(estimates)
    now = now or timezone.now()
    timed = [estimate for estimate in estimates if estimate.start is not None]
    if not timed:
        why = "; ".join(estimate.error for estimate in estimates) or "no cluster offers this GPU type"
        return Placement(None, f"No cluster can start this job: {why}.", estimates)
    earliest = min(max(estimate.start, now) for estimate in timed)
    close = [estimate for estimate in timed if max(estimate.start, now) - earliest < SAME_START]
    chosen = next((estimate for estimate in close if estimate.cluster == own), close[0])
    start = max(chosen.start, now)
    others = [estimate for estimate in estimates if estimate is not chosen]
    if not others:
        return Placement(chosen.cluster, f"{chosen.cluster} can start it {_at(start, now)}.", estimates)
    parts = []
    for estimate in others:
        if estimate.start is None:
            parts.append(estimate.error)
        else:
            parts.append(f"{estimate.cluster} {_at(max(estimate.start, now), now)}")
    later = [max(estimate.start, now) for estimate in others if estimate.start is not None]
    gain = min(later) - start if later else None
    if gain is not None and gain >= SAME_START:
        lead = f", {int(gain.total_seconds() // 60)} minutes before any other"
    elif gain is not None:
        lead = (
            " (as soon as elsewhere: " + ("the portal's own cluster" if chosen.cluster == own else "listed first") + ")"
        )
    else:
        lead = ""
    return Placement(
        chosen.cluster,
        f"{chosen.cluster} can start it {_at(start, now)}{lead}; {'; '.join(parts)}.",
        estimates,
    )
