"""The telemetry page's table sizes: the planner's estimate on PostgreSQL once a table has
been analysed, so a page view never counts tens of millions of rollup rows."""

from datetime import UTC, datetime

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from telemetry.actions.storage import table_sizes
from telemetry.models import GpuLatest

MEASUREMENTS = dict(
    compute_util=1.0, memory_util=1.0, memory_used_mb=1, memory_total_mb=100, temperature_c=30.0, power_w=50.0
)


def _by_table(sizes):
    return {entry["table"]: entry for entry in sizes}


@pytest.mark.django_db(transaction=True)  # ANALYZE must see committed rows
def test_an_analysed_table_is_sized_from_the_estimate_without_counting():
    if connection.vendor != "postgresql":
        pytest.skip("estimates are PostgreSQL's")
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    GpuLatest.objects.bulk_create(
        GpuLatest(node="n1", index=index, uuid=f"GPU-{index}", time=moment, source="nvml", **MEASUREMENTS)
        for index in range(7)
    )
    latest = GpuLatest._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {latest}")
    with CaptureQueriesContext(connection) as queries:
        sizes = _by_table(table_sizes())
    assert sizes[latest]["estimated"] is True and sizes[latest]["rows"] == 7
    assert sizes[latest]["bytes"] > 0
    assert not any("COUNT(" in query["sql"].upper() and latest in query["sql"] for query in queries.captured_queries)


@pytest.mark.django_db
def test_a_table_never_analysed_is_counted():
    moment = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    GpuLatest.objects.create(node="n1", index=0, uuid="GPU-0", time=moment, source="nvml", **MEASUREMENTS)
    entry = _by_table(table_sizes())[GpuLatest._meta.db_table]
    if entry["estimated"]:
        pytest.skip("this database analysed the table already (autovacuum)")
    assert entry["rows"] == 1
