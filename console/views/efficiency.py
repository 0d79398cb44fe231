"""The admins' board of GPUs held but idle: ended jobs' GPU-hours, mean compute and idle GPU-hours by
user, group and GPU type over a period (telemetry/efficiency.py), on the page and as CSV."""

from __future__ import annotations

import csv
from datetime import timedelta

from django.http import HttpResponse
from django.shortcuts import render
from django.utils import timezone

from accounts.access import role_required
from accounts.models import Role
from telemetry.efficiency import GROUPINGS, summary

PERIODS = {"7": 7, "30": 30, "90": 90}
CSV_COLUMNS = ("by", "key", "jobs", "gpu_hours", "mean_compute_percent", "idle_gpu_hours", "idle_share")


def _period(request) -> tuple[str, int]:
    chosen = request.GET.get("days", "30")
    return (chosen, PERIODS[chosen]) if chosen in PERIODS else ("30", 30)


def _tables(days: int) -> dict:
    until = timezone.now()
    since = until - timedelta(days=days)
    return {by: summary(by, since, until) for by in GROUPINGS}


@role_required(Role.ADMIN)
def efficiency_board(request):
    chosen, days = _period(request)
    tables = _tables(days)
    idle = sum(row.idle_gpu_hours for row in tables["user"])
    held = sum(row.gpu_hours for row in tables["user"])
    return render(
        request,
        "console/efficiency.html",
        {"tables": tables, "days": chosen, "periods": PERIODS, "idle_gpu_hours": idle, "gpu_hours": held},
    )


@role_required(Role.ADMIN)
def efficiency_csv(request):
    chosen, days = _period(request)
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="gpu-efficiency-{chosen}-days.csv"'
    writer = csv.writer(response)
    writer.writerow(CSV_COLUMNS)
    for by, rows in _tables(days).items():
        for row in rows:
            writer.writerow(
                [by, row.key, row.jobs, row.gpu_hours, row.util_mean, row.idle_gpu_hours, f"{row.idle_share:.3f}"]
            )
    return response
