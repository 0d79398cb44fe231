"""Evaluating alert rules over the raw telemetry window.

A rule holds for a node when, over the last `window_seconds`, every sampled moment had the
node's worst GPU past the threshold, and the samples cover the whole window (a node that
just started reporting cannot have been hot for five minutes). An episode opens once (the
database allows one open alert per rule and node), emails once, and resolves when the rule
stops holding; the cool-down keeps a flapping node from emailing again at once.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from datetime import timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from alerts.models import Alert, AlertRule
from jobs.models import Job, JobState
from telemetry.models import GpuSampleRaw

log = logging.getLogger(__name__)


def _value(metric: str, row: dict) -> float:
    if metric == AlertRule.Metric.MEMORY_USED_PERCENT:
        return 100.0 * row["memory_used_mb"] / row["memory_total_mb"] if row["memory_total_mb"] else 0.0
    return float(row[metric])


def node_values(rule: AlertRule, now) -> dict[str, tuple[bool, float]]:
    """For each node with samples in the window: (rule holds over the whole window, worst value)."""
    since = now - timedelta(seconds=rule.window_seconds)
    # Samples arrive every ~10 s; the first must be within one interval of the window start.
    tolerance = timedelta(seconds=2 * settings.TELEMETRY_INTERVAL_SECONDS)
    rows = GpuSampleRaw.objects.filter(time__gte=since - tolerance, time__lte=now).values(
        "node", "time", "memory_used_mb", "memory_total_mb", "compute_util", "temperature_c"
    )
    # node -> time -> worst value over the node's GPUs at that moment
    worst: dict[str, dict] = defaultdict(dict)
    for row in rows:
        value = _value(rule.metric, row)
        moments = worst[row["node"]]
        moments[row["time"]] = max(value, moments.get(row["time"], float("-inf")))
    result = {}
    for node, moments in worst.items():
        times = sorted(moments)
        # Held for the whole window: a sample at (or just before) its start, and a recent one.
        covered = times[0] <= since and times[-1] >= now - tolerance
        in_window = [moments[t] for t in times if t >= since - tolerance]
        holds = covered and all(value > rule.threshold for value in in_window)
        result[node] = (holds, max(in_window))
    return result


def idle_allocated_values(rule: AlertRule, now) -> dict[str, tuple[bool, float]]:
    """For each node with a GPU that a job has held since before the window began: (one such GPU
    computed under the threshold at every sampled moment of the whole window, the least busy
    such GPU's highest value). Whatever source the samples came from (agents, DCGM, Prometheus)."""
    since = now - timedelta(seconds=rule.window_seconds)
    tolerance = timedelta(seconds=2 * settings.TELEMETRY_INTERVAL_SECONDS)
    held = {
        (node, index)
        for allocation in Job.objects.on_cluster()
        .filter(state=JobState.RUNNING, start_time__lte=since)
        .values_list("gpu_allocation", flat=True)
        for node, indexes in (allocation or {}).items()
        for index in indexes
    }
    if not held:
        return {}
    rows = GpuSampleRaw.objects.filter(
        time__gte=since - tolerance, time__lte=now, node__in={node for node, _ in held}
    ).values_list("node", "index", "time", "compute_util")
    samples: dict[tuple[str, int], list[tuple]] = defaultdict(list)
    for node, index, moment, compute in rows:
        if (node, index) in held:
            samples[(node, index)].append((moment, compute))
    result: dict[str, tuple[bool, float]] = {}
    for (node, _), moments in samples.items():
        moments.sort()
        covered = moments[0][0] <= since and moments[-1][0] >= now - tolerance
        highest = max(compute for moment, compute in moments if moment >= since - tolerance)
        idle = covered and highest < rule.threshold
        holds, value = result.get(node, (False, float("inf")))
        result[node] = (holds or idle, min(value, highest))
    return result


def _detail(rule: AlertRule, node: str, value: float) -> str:
    if rule.metric == AlertRule.Metric.IDLE_ALLOCATED:
        return (
            f"A GPU on {node} held by a running job has computed under {rule.threshold:g} % for "
            f"{rule.window_seconds // 60} min (at most {value:.1f} %): the job holds a GPU it does not use."
        )
    return (
        f"{rule.get_metric_display()} on {node} has been above {rule.threshold:g} "
        f"for {rule.window_seconds // 60} min (worst {value:.1f})."
    )


def _admin_emails() -> list[str]:
    User = get_user_model()
    return list(
        User.objects.filter(profile__role="admin", is_active=True).exclude(email="").values_list("email", flat=True)
    )


def _notify(alert_id: int) -> None:
    alert = Alert.objects.select_related("rule").get(pk=alert_id)
    # Claim the notification: a second evaluator racing us sends nothing.
    if not Alert.objects.filter(pk=alert_id, notified_at__isnull=True).update(notified_at=timezone.now()):
        return
    recipients = _admin_emails()
    if not recipients:
        log.warning("alert %s has no admin to email", alert)
        return
    send_mail(
        subject=f"[GPU pool] {alert.rule.name} on {alert.node}",
        message=(
            f"{alert.detail}\n\nOpened {alert.opened_at:%Y-%m-%d %H:%M:%S %Z}.\n"
            f"Console: {settings.SITE_URL}/console/alerts/\n"
        ),
        from_email=settings.DEFAULT_FROM_EMAIL,
        recipient_list=recipients,
    )


def evaluate(now=None) -> dict:
    now = now or timezone.now()
    opened = resolved = 0
    for rule in AlertRule.objects.filter(enabled=True):
        values = (
            idle_allocated_values(rule, now)
            if rule.metric == AlertRule.Metric.IDLE_ALLOCATED
            else node_values(rule, now)
        )
        open_alerts = {alert.node: alert for alert in Alert.objects.filter(rule=rule, resolved_at__isnull=True)}
        for node, (holds, value) in values.items():
            if holds and node not in open_alerts:
                cooled = not Alert.objects.filter(
                    rule=rule, node=node, resolved_at__gte=now - timedelta(seconds=rule.cooldown_seconds)
                ).exists()
                if not cooled:
                    continue
                detail = _detail(rule, node, value)
                try:
                    with transaction.atomic():
                        alert = Alert.objects.create(rule=rule, node=node, opened_at=now, value=value, detail=detail)
                        if rule.email_admins:
                            transaction.on_commit(lambda alert_id=alert.pk: _notify(alert_id))
                    opened += 1
                except IntegrityError:
                    continue  # another evaluator opened it first
            elif not holds and node in open_alerts:
                resolved += Alert.objects.filter(pk=open_alerts[node].pk, resolved_at__isnull=True).update(
                    resolved_at=now
                )
        # A node that stopped reporting altogether resolves too: nothing holds there now.
        for node, alert in open_alerts.items():
            if node not in values:
                resolved += Alert.objects.filter(pk=alert.pk, resolved_at__isnull=True).update(resolved_at=now)
    return {"opened": opened, "resolved": resolved}
