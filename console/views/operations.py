"""The admins' operations page: pool utilisation, queue wait and the hardware ROI calculator."""

from __future__ import annotations

import logging
import math
from datetime import datetime, timedelta
from decimal import Decimal
from urllib.parse import urlencode

from django import forms
from django.conf import settings
from django.contrib import messages
from django.core.validators import MaxValueValidator, MinValueValidator
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from accounts.access import role_required
from accounts.models import Role
from audit.log import record
from cluster.clusters.registry import primary_cluster_name
from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import SlurmError
from cluster.models import ClusterStatus, Node
from cluster.records.accounting import gpus_allocated_at
from console import lab
from console import operations as ops
from console.actions import power

log = logging.getLogger(__name__)

# period key -> (label, bucket, number of buckets)
PERIODS = {
    "7d": ("Last 7 days, by day", "day", 7),
    "8w": ("Last 8 weeks, by week", "week", 8),
}
DEFAULT_PERIOD = "7d"


def period_window(period: str, now: datetime) -> tuple[datetime, datetime, str]:
    """(start, end, bucket): whole local days (or Monday-based weeks) ending with the
    current, partial one, which is measured up to `now`."""
    _label, bucket, count = PERIODS[period]
    local = timezone.localtime(now)
    midnight = local.replace(hour=0, minute=0, second=0, microsecond=0)
    if bucket == "day":
        start = midnight - timedelta(days=count - 1)
    else:
        start = midnight - timedelta(days=midnight.weekday()) - timedelta(weeks=count - 1)
    return start, now, bucket


def _dollars(label: str, minimum: str, message: str) -> forms.DecimalField:
    return forms.DecimalField(
        label=label, max_digits=14, decimal_places=2, validators=[MinValueValidator(Decimal(minimum), message)]
    )


class RoiForm(forms.Form):
    hardware_cost = _dollars("Hardware cost ($)", "0.01", "The hardware cost must be more than 0 (ROI divides by it).")
    power_per_month = _dollars("Power per month ($)", "0", "Power cost cannot be negative.")
    running_per_month = _dollars("Running per month ($)", "0", "Running cost cannot be negative.")
    revenue_per_month = _dollars("Revenue per month ($)", "0", "Revenue cannot be negative.")
    months = forms.IntegerField(
        label="Months",
        validators=[
            MinValueValidator(1, "At least 1 month."),
            MaxValueValidator(120, "At most 120 months."),
        ],
    )

    def result(self) -> ops.RoiResult:
        data = self.cleaned_data
        return ops.roi(
            data["hardware_cost"],
            data["power_per_month"],
            data["running_per_month"],
            data["revenue_per_month"],
            data["months"],
        )


def _roi_query(inputs: ops.RoiInputs, period: str) -> str:
    return urlencode(
        {
            "period": period,
            "hardware_cost": inputs.hardware_cost,
            "power_per_month": inputs.power_per_month,
            "running_per_month": inputs.running_per_month,
            "revenue_per_month": inputs.revenue_per_month,
            "months": inputs.months,
        }
    )


def _percent(ratio: float | None) -> float | None:
    # Two decimals: a few jobs on a large pool over a week are a fraction of a percent, and
    # "0.0 %" would read as "nothing counted".
    return None if ratio is None else round(ratio * 100, 2)


def _gpu_hours(seconds: float) -> float:
    return round(seconds / 3600, 2)


def percent_label(ratio: float | None) -> str:
    """83.25 %; "< 0.01 %" for a share too small to show but not nothing; "–" without GPUs."""
    if ratio is None:
        return "–"
    percent = _percent(ratio)
    if percent == 0 and ratio > 0:
        return "< 0.01 %"
    return f"{percent:g} %"


def gpu_hours_label(seconds: float) -> str:
    hours = _gpu_hours(seconds)
    return "< 0.01" if hours == 0 and seconds > 0 else f"{hours:g}"


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 1)


def duration(seconds: float | None) -> str:
    """42 s, 3 min 10 s, 2 h 05 min, 1 d 3 h."""
    if seconds is None:
        return "–"
    whole = round(seconds)
    if whole < 60:
        return f"{whole} s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours} h {minutes:02d} min"
    days, hours = divmod(hours, 24)
    return f"{days} d {hours} h"


def _figures(records, inventory: dict[str, int], start: datetime, end: datetime, bucket: str, now: datetime) -> dict:
    utilisation = ops.pool_utilisation(records, inventory, start, end, bucket, now=now)
    waits = ops.queue_wait(records, start, end, bucket, now=now)
    overall = ops.overall_wait(records, start, end, now=now)
    allocated = sum(row.allocated_gpu_seconds for row in utilisation)
    available = sum(row.available_gpu_seconds for row in utilisation)
    gpu_types = list(inventory)
    date_format = "%Y-%m-%d"
    rows = []
    for used, wait in zip(utilisation, waits, strict=True):
        local_start = timezone.localtime(used.start)
        rows.append(
            {
                "label": local_start.strftime(date_format) if bucket == "day" else f"week of {local_start:%Y-%m-%d}",
                "allocated_gpu_hours": _gpu_hours(used.allocated_gpu_seconds),
                "available_gpu_hours": _gpu_hours(used.available_gpu_seconds),
                "utilisation_percent": _percent(used.utilisation),
                "utilisation_label": percent_label(used.utilisation),
                "allocated_label": gpu_hours_label(used.allocated_gpu_seconds),
                "type_labels": [
                    percent_label(used.by_type[name].utilisation) if name in used.by_type else "–" for name in gpu_types
                ],
                "type_percents": [
                    _percent(used.by_type[name].utilisation) if name in used.by_type else None for name in gpu_types
                ],
                "jobs": wait.jobs,
                "average_wait": duration(wait.average_wait_seconds),
                "p95_wait": duration(wait.p95_wait_seconds),
            }
        )
    by_type = {
        name: [_percent(row.by_type[name].utilisation) if name in row.by_type else None for row in utilisation]
        for name in gpu_types
    }
    percents = [_percent(row.utilisation) for row in utilisation]
    highest = max([value for series in [percents, *by_type.values()] for value in series if value is not None] or [0])
    held_now = gpus_allocated_at(records, now)
    gpus_now, total_gpus = sum(held_now.values()), sum(inventory.values())
    chart = {
        # Every bucket of the period is a label, data or not: the x axis is always the whole period.
        "labels": [timezone.localtime(row.start).strftime(date_format) for row in utilisation],
        "bucket": bucket,
        "utilisation": percents,
        "by_type": by_type,
        # Percent on a real 0-100 scale (more only if allocations exceed the mirrored pool),
        # never a range stretched to fit 0.02.
        "utilisation_range": [0, max(100, math.ceil(highest))],
        "jobs": [row.jobs for row in waits],
        "average_wait_minutes": [_minutes(row.average_wait_seconds) for row in waits],
        "p95_wait_minutes": [_minutes(row.p95_wait_seconds) for row in waits],
    }
    return {
        "rows": rows,
        "chart": chart,
        "gpu_types": gpu_types,
        "now": {
            "gpus": gpus_now,
            "total": total_gpus,
            "percent": _percent(gpus_now / total_gpus) if total_gpus else None,
            "by_type": [(name or "untyped", count, inventory.get(name)) for name, count in held_now.items()],
        },
        "summary": {
            "utilisation_percent": _percent(allocated / available) if available else None,
            "utilisation_label": percent_label(allocated / available if available else None),
            "allocated_label": gpu_hours_label(allocated),
            "allocated_gpu_seconds": allocated,
            "allocated_gpu_hours": _gpu_hours(allocated),
            "jobs": overall.jobs,
            "average_wait": duration(overall.average_wait_seconds),
            "p95_wait": duration(overall.p95_wait_seconds),
        },
    }


def _accounting_by_cluster(clusters: list[str], start: datetime, end: datetime):
    """({cluster: its accounting records}, [(cluster, why not read)]) for each cluster, the
    portal's own first. A further cluster its probe finds not answering is not asked (it would
    hold the page for its timeout)."""
    own = primary_cluster_name()
    silent = set(ClusterStatus.objects.filter(answering=False, checked_at__isnull=False).values_list("name", flat=True))
    read, unread = {}, []
    for name in clusters:
        if name != own and name in silent:
            unread.append((name, "The cluster is not answering."))
            continue
        try:
            read[name] = ops.load_records(rest_client(cluster=None if name == own else name), start, end)
        except SlurmError as exc:
            log.warning("operations figures: accounting of %s unavailable: %s", name, exc)
            unread.append((name, exc.message))
    return read, unread


@role_required(Role.ADMIN)
def operations(request):
    period = request.GET.get("period", DEFAULT_PERIOD)
    if period not in PERIODS:
        period = DEFAULT_PERIOD
    now = timezone.now()
    start, end, bucket = period_window(period, now)
    inventories = ops.gpu_inventory_by_cluster()
    inventory = ops.merged_inventory(inventories.values())
    read, unread = _accounting_by_cluster(list(inventories), start, end)
    figures = None
    if read:
        # Measured against the GPUs of the clusters whose accounting was read: a cluster left out
        # has neither its jobs nor its GPUs counted.
        records = [record for cluster_records in read.values() for record in cluster_records]
        figures = _figures(records, ops.merged_inventory(inventories[name] for name in read), start, end, bucket, now)
        if len(inventories) > 1:
            figures["now"]["by_cluster"] = [
                (name, sum(gpus_allocated_at(read[name], now).values()), sum(inventories[name].values()))
                for name in read
            ]

    roi_fields = RoiForm.base_fields
    if any(name in request.GET for name in roi_fields):
        form = RoiForm(request.GET)
    else:
        first = ops.ARTICLE_CONFIGS[0]
        form = RoiForm(initial={name: getattr(first, name) for name in roi_fields})
    roi_result = form.result() if form.is_bound and form.is_valid() else None

    article = [
        {"inputs": inputs, "result": ops.roi_of(inputs), "query": _roi_query(inputs, period)}
        for inputs in ops.ARTICLE_CONFIGS
    ]
    context = {
        "periods": [(key, label) for key, (label, _bucket, _count) in PERIODS.items()],
        "period": period,
        "period_label": PERIODS[period][0],
        "start": start,
        "end": end,
        "inventory": inventory,
        "inventories": inventories if len(inventories) > 1 else {},
        "gpu_total": sum(inventory.values()),
        "figures": figures,
        # (cluster, why) of each cluster whose accounting could not be read.
        "slurm_errors": unread,
        "several_clusters": len(inventories) > 1,
        "form": form,
        "roi_result": roi_result,
        "article": article,
        "power": power.power_overview(now),
    }
    return render(request, "console/operations.html", context)


@role_required(Role.ADMIN)
@require_POST
def node_power(request, name: str):
    """Admins: keep a node powered on (or let it go), or power it down once its jobs end."""
    node = get_object_or_404(Node, name=name)
    action = request.POST.get("action", "")
    try:
        if action in ("keep_on", "release"):
            power.keep_on(node.name, request.user, keep=action == "keep_on")
        elif action == "power_down":
            slurm_cli().power_node(node.name, "POWER_DOWN_ASAP", reason=f"powered down by {request.user.username}")
        else:
            messages.error(request, "Unknown power action.")
            return redirect("console:operations")
    except SlurmError as exc:
        messages.error(request, f"Slurm refused: {exc.public_message}")
        return redirect("console:operations")
    record(request.user, f"node.power.{action}", node.name)
    messages.success(request, f"{node.name}: {action.replace('_', ' ')} asked of Slurm.")
    return redirect("console:operations")


@role_required(Role.ADMIN)
def lab_view(request):
    """Every group side by side (console/lab.py); ?format=csv for the table as CSV."""
    figures, error = lab.lab_figures()
    if request.GET.get("format") == "csv":
        response = HttpResponse(lab.as_csv(figures), content_type="text/csv")
        response["Content-Disposition"] = 'attachment; filename="groups.csv"'
        return response
    context = {"figures": figures, "error": error, "chart": lab.chart(figures), "gpu_types": sorted(settings.GPU_TYPES)}
    context["total_hours"] = sum((row.total_gpu_hours for row in figures), Decimal(0))
    return render(request, "console/lab.html", context)
