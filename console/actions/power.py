"""The pool's power policy, on top of Slurm's own power saving (SuspendProgram/ResumeProgram;
on the dev cluster deploy/devcluster/power/):

- **Night mode**: nodes idle for POWER_NIGHT_SUSPEND_SECONDS from 22:00 to 06:00, or
  POWER_DAY_SUSPEND_SECONDS by day (0: never), are powered down (scontrol POWER_DOWN: Slurm runs
  its SuspendProgram). Slurm wakes a powered-down node by itself when a job needs it.
- **Morning**: in a window without an idle rule (by day, with POWER_DAY_SUSPEND_SECONDS 0) the
  nodes the idle rule powered down are powered up again, so the day's first jobs do not each wait
  for a node to boot (minutes on real hardware).
- **Standby nodes** (POWER_STANDBY_NODES): kept drained and powered down; when more than
  POWER_PEAK_QUEUE jobs wait for their GPU type they are resumed (undrained and powered up), and
  when no job of that type waits they are drained again and powered down once their jobs end.
- **Keep on**: admins pin a node on (Slurm's SuspendExcNodes), e.g. for a demo or a benchmark.
- **Energy**: from the mirror's power spans (cluster.NodePowerSpan), the hours each node spent
  powered down times its idle draw (its GPUs' power_w.idle plus NODE_HOST_IDLE_WATTS).

Every decision is a `PowerDecision` row (what, which node, the queue length that caused it), shown
on the operations page. `apply_power_policy` is idempotent and runs every minute (beat).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from decimal import Decimal

from django.conf import settings
from django.db.models import Count, Q
from django.utils import timezone

from cluster.clusters.services import slurm_cli
from cluster.errors import SlurmError
from cluster.models import Node, NodePowerSpan
from console.models import PowerDecision, PoweredOnPin
from jobs.models import Job, JobState
from plans.spot import NIGHT, window_at

log = logging.getLogger(__name__)

# The reason a standby node is drained with: how the policy knows the drain is its own.
STANDBY_REASON = "gpupool standby: woken when more than POWER_PEAK_QUEUE jobs wait"
STANDBY_REASON_PREFIX = "gpupool standby"
# The reason an idle node is powered down with: how the morning knows which nodes to power up.
IDLE_REASON_PREFIX = "gpupool: idle for"


def suspend_seconds_at(moment: datetime) -> int:
    return settings.POWER_NIGHT_SUSPEND_SECONDS if window_at(moment) == NIGHT else settings.POWER_DAY_SUSPEND_SECONDS


def waiting_by_gpu_type() -> dict[str, int]:
    rows = Job.objects.filter(state=JobState.PENDING).values("gpu_type").annotate(count=Count("id"))
    return {row["gpu_type"]: row["count"] for row in rows}


def _decide(kind: str, node: str = "", detail: str = "", queue: int | None = None) -> PowerDecision:
    return PowerDecision.objects.create(kind=kind, node=node, detail=detail, queue_length=queue)


def _power_down_idle(now: datetime) -> None:
    """Nodes idle (nothing allocated, not drained, not kept on, not standby) for at least this
    window's seconds are powered down. Slurm's own SuspendTime is one global value that scontrol
    cannot change (nor a partition's, on 24.11), so the window's is applied here."""
    seconds = suspend_seconds_at(now)
    if not seconds:
        return
    pinned = set(PoweredOnPin.objects.values_list("node", flat=True))
    idle = Node.objects.filter(state="IDLE", idle_since__lte=now - timedelta(seconds=seconds)).exclude(
        name__in=[*pinned, *settings.POWER_STANDBY_NODES]
    )
    cli = slurm_cli()
    for node in idle:
        if node.power_state != "on" or "DRAIN" in node.state_flags.split(","):
            continue
        cli.power_node(node.name, "POWER_DOWN", reason=f"{IDLE_REASON_PREFIX} {seconds} s")
        _decide(PowerDecision.Kind.POWERED_DOWN, node.name, f"idle since {node.idle_since:%H:%M} ({seconds} s rule)")


def _power_up_for_the_day(now: datetime) -> None:
    """In a window without an idle rule, nodes the rule powered down in the last window are powered
    up: by day they would stay down until a job waited for one to boot. Nodes an admin or the
    standby rule powered down keep their own reasons and stay down."""
    if suspend_seconds_at(now):
        return
    cli = slurm_cli()
    for node in Node.objects.filter(reason__startswith=IDLE_REASON_PREFIX):
        if node.power_state in ("off", "powering_down"):
            cli.power_node(node.name, "POWER_UP")
            _decide(PowerDecision.Kind.POWERED_UP, node.name, "the window without an idle rule began")


def _standby_marked(node: Node) -> bool:
    return node.reason.startswith(STANDBY_REASON_PREFIX)


def _apply_standby(waiting: dict[str, int]) -> None:
    """Standby: powered down and drained with STANDBY_REASON. Slurm lifts the drain of
    POWER_DOWN_ASAP once the node is down (24.11: "idle~"), after which any job would wake it, so
    a marked node that is not drained is drained again."""
    cli = slurm_cli()
    for node in Node.objects.filter(name__in=settings.POWER_STANDBY_NODES):
        gpu_type = node.gpus[0]["type"] if node.gpus else ""
        queue = waiting.get(gpu_type, 0)
        drained = "DRAIN" in node.state_flags.split(",")
        if _standby_marked(node):
            if queue > settings.POWER_PEAK_QUEUE:
                cli.resume_node(node.name)
                cli.power_node(node.name, "POWER_UP")
                _decide(PowerDecision.Kind.WOKEN, node.name, f"{queue} {gpu_type} jobs waiting", queue)
            elif not drained:
                cli.drain_node(node.name, STANDBY_REASON)
        elif queue == 0 and not drained:
            cli.power_node(node.name, "POWER_DOWN_ASAP", reason=STANDBY_REASON)
            _decide(PowerDecision.Kind.STANDBY, node.name, f"no {gpu_type} job waiting", queue)


def apply_power_policy(now: datetime | None = None) -> str:
    """One pass: idle nodes powered down by the window's rule (or, without one, powered up
    again), then the standby nodes. Slurm errors are logged and the next pass tries again."""
    now = now or timezone.now()
    try:
        _power_down_idle(now)
        _power_up_for_the_day(now)
        _apply_standby(waiting_by_gpu_type())
    except SlurmError as exc:
        log.warning("power policy not applied: %s", exc)
        return f"failed: {exc.message}"
    return "applied"


def keep_on(node: str, actor, keep: bool) -> None:
    """An admin pins a node on (never suspended, powered up now) or lets it go again."""
    if keep:
        PoweredOnPin.objects.get_or_create(node=node, defaults={"pinned_by": actor})
    else:
        PoweredOnPin.objects.filter(node=node).delete()
    cli = slurm_cli()
    cli.set_suspend_excluded_nodes(sorted(PoweredOnPin.objects.values_list("node", flat=True)))
    if keep:
        cli.power_node(node, "POWER_UP")
    _decide(PowerDecision.Kind.KEPT_ON if keep else PowerDecision.Kind.RELEASED, node, f"by {actor}")


def node_idle_watts(node: Node) -> int:
    gpus = sum(
        group["count"] * int(settings.GPU_TYPES.get(group["type"], {}).get("power_w", {}).get("idle", 0))
        for group in node.gpus
    )
    return gpus + settings.NODE_HOST_IDLE_WATTS


@dataclass(frozen=True)
class EnergySaved:
    hours_off: Decimal
    kwh: Decimal


def energy_saved(since: datetime, now: datetime | None = None) -> EnergySaved:
    """Powered-down node-hours since `since`, and the kWh their idle draw would have taken."""
    now = now or timezone.now()
    watts = {node.name: node_idle_watts(node) for node in Node.objects.all()}
    seconds = Decimal(0)
    watt_seconds = Decimal(0)
    spans = NodePowerSpan.objects.filter(state="off").filter(Q(ended_at__isnull=True) | Q(ended_at__gt=since))
    for span in spans:
        start = max(span.started_at, since)
        end = min(span.ended_at or now, now)
        if end <= start:
            continue
        length = Decimal((end - start).total_seconds())
        seconds += length
        watt_seconds += length * watts.get(span.node, settings.NODE_HOST_IDLE_WATTS)
    return EnergySaved(
        hours_off=(seconds / 3600).quantize(Decimal("0.01")),
        kwh=(watt_seconds / 3600 / 1000).quantize(Decimal("0.001")),
    )


def power_overview(now: datetime | None = None) -> dict:
    """The operations page's power section."""
    now = now or timezone.now()
    nodes = list(Node.objects.all())
    by_state: dict[str, list[Node]] = {}
    for node in nodes:
        by_state.setdefault(node.power_state, []).append(node)
    return {
        "by_state": sorted(by_state.items()),
        "pinned": set(PoweredOnPin.objects.values_list("node", flat=True)),
        "standby": set(settings.POWER_STANDBY_NODES),
        "waiting": waiting_by_gpu_type(),
        "peak_queue": settings.POWER_PEAK_QUEUE,
        "suspend_seconds": suspend_seconds_at(now),
        "saved_day": energy_saved(now - timedelta(days=1), now),
        "saved_month": energy_saved(now - timedelta(days=30), now),
        "decisions": list(PowerDecision.objects.all()[:20]),
    }
