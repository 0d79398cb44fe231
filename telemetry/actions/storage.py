"""Writing samples: one bulk INSERT of raw rows and one bulk upsert of the latest row per
GPU, whatever the batch size, so ingest cost grows with samples, not with queries."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta

from django.conf import settings
from django.db import connection, transaction
from django.db.models import Avg, Count, Max, Sum
from django.db.models.functions import TruncHour, TruncMinute
from django.utils import timezone

from telemetry.models import MEASUREMENT_FIELDS, GpuHour, GpuLatest, GpuMinute, GpuSampleRaw
from telemetry.samples import GpuSample

LATEST_FIELDS = ["uuid", "time", *MEASUREMENT_FIELDS, "source"]


def _measurements(sample: GpuSample) -> dict:
    return {field: getattr(sample, field) for field in MEASUREMENT_FIELDS}


def store_samples(samples: Iterable[GpuSample], *, source: str) -> int:
    samples = list(samples)
    if not samples:
        return 0
    raw = [
        GpuSampleRaw(time=s.time, cluster=s.cluster, node=s.node, index=s.index, **_measurements(s)) for s in samples
    ]
    # The newest sample of each GPU in this batch becomes its latest.
    newest: dict[tuple[str, str, int], GpuSample] = {}
    for sample in samples:
        key = (sample.cluster, sample.node, sample.index)
        if key not in newest or sample.time >= newest[key].time:
            newest[key] = sample
    latest = [
        GpuLatest(
            cluster=s.cluster, node=s.node, index=s.index, uuid=s.uuid, time=s.time, source=source, **_measurements(s)
        )
        for s in newest.values()
    ]
    with transaction.atomic():
        GpuSampleRaw.all_clusters.bulk_create(raw, batch_size=2000)
        GpuLatest.all_clusters.bulk_create(
            # A fixed order: no deadlocks between batches.
            sorted(latest, key=lambda row: (row.cluster, row.node, row.index)),
            update_conflicts=True,
            unique_fields=["cluster", "node", "index"],
            update_fields=LATEST_FIELDS,
            batch_size=2000,
        )
    return len(samples)


def _rollup(source_model, target_model, trunc, since, until) -> int:
    rows = (
        source_model.all_clusters.filter(time__gte=since, time__lt=until)
        if source_model is GpuSampleRaw
        else source_model.all_clusters.filter(bucket__gte=since, bucket__lt=until)
    )
    time_field = "time" if source_model is GpuSampleRaw else "bucket"
    weight = Count("id") if source_model is GpuSampleRaw else Sum("samples")
    aggregated = (
        rows.annotate(b=trunc(time_field))
        .values("cluster", "node", "index", "b")
        .annotate(
            n=weight,
            compute=Avg("compute_util"),
            memory=Avg("memory_util"),
            used=Max("memory_used_mb"),
            total=Max("memory_total_mb"),
            temp=Max("temperature_c"),
            power=Avg("power_w"),
        )
    )
    objects = [
        target_model(
            cluster=row["cluster"],
            node=row["node"],
            index=row["index"],
            bucket=row["b"],
            samples=row["n"],
            compute_util=row["compute"],
            memory_util=row["memory"],
            memory_used_mb=row["used"],
            memory_total_mb=row["total"],
            temperature_c=row["temp"],
            power_w=row["power"],
        )
        for row in aggregated
    ]
    target_model.all_clusters.bulk_create(
        objects,
        update_conflicts=True,
        unique_fields=["cluster", "node", "index", "bucket"],
        update_fields=["samples", *MEASUREMENT_FIELDS],
        batch_size=2000,
    )
    return len(objects)


def roll_up(now=None) -> dict:
    """Recompute the minute rollups of the last 3 complete minutes and the hour rollups of
    the last 2 hours, then drop what is past retention. Idempotent: a rerun rewrites the
    same rows, so a late or repeated run loses and doubles nothing."""
    now = now or timezone.now()
    this_minute = now.replace(second=0, microsecond=0)
    this_hour = this_minute.replace(minute=0)
    minutes = _rollup(GpuSampleRaw, GpuMinute, TruncMinute, this_minute - timedelta(minutes=3), this_minute)
    hours = _rollup(GpuMinute, GpuHour, TruncHour, this_hour - timedelta(hours=2), this_minute)
    pruned = {
        "raw": GpuSampleRaw.all_clusters.filter(time__lt=now - settings.TELEMETRY_RAW_RETENTION).delete()[0],
        "minute": GpuMinute.all_clusters.filter(bucket__lt=now - settings.TELEMETRY_MINUTE_RETENTION).delete()[0],
        "hour": GpuHour.all_clusters.filter(bucket__lt=now - settings.TELEMETRY_HOUR_RETENTION).delete()[0],
    }
    return {"minutes": minutes, "hours": hours, "pruned": pruned}


def table_sizes() -> list[dict]:
    """Rows and (on PostgreSQL) bytes of each telemetry table, for the telemetry page.

    On PostgreSQL the row count is the planner's estimate (`estimated`: True) once the table
    has been analysed: an exact COUNT(*) reads the whole table, and at 10,000 GPUs the hour
    rollups alone are twenty million rows, on every view of an admin page.
    """
    sizes = []
    for model in (GpuLatest, GpuSampleRaw, GpuMinute, GpuHour):
        table = model._meta.db_table
        entry = {"table": table, "rows": None, "bytes": None, "estimated": False}
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute(
                    "SELECT pg_total_relation_size(c.oid), c.reltuples FROM pg_class c WHERE c.oid = %s::regclass",
                    [table],
                )
                entry["bytes"], estimate = cursor.fetchone()
            if estimate is not None and estimate >= 0:  # -1: never analysed yet
                entry["rows"], entry["estimated"] = int(estimate), True
        if entry["rows"] is None:
            entry["rows"] = model.all_clusters.count()
        sizes.append(entry)
    return sizes
