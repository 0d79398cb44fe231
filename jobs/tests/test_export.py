"""GET /api/v1/jobs/export (jobs/api/export.py): every one of the caller's jobs in one
streamed response, JSON lines or CSV, newest first, across keyset chunks with equal creation
times at their edges; nobody else's jobs; a spreadsheet formula is never a cell; the ASGI
path streams the same rows."""

import csv
import io
import json
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from jobs.api import export
from jobs.models import Job

pytestmark = pytest.mark.django_db


def _jobs(owner, count: int, *, same_moment_every: int = 3):
    """`count` jobs whose creation times repeat in runs of `same_moment_every` (ties at chunk edges)."""
    start = timezone.now() - timedelta(days=1)
    jobs = Job.objects.bulk_create(
        Job(owner=owner, cluster_user=owner.username, name=f"job-{n}", state="COMPLETED", spec={}) for n in range(count)
    )
    for n, job in enumerate(jobs):
        Job.objects.filter(pk=job.pk).update(created_at=start + timedelta(seconds=n // same_moment_every))
    return jobs


def _newest_first(owner) -> list[int]:
    return list(Job.objects.filter(owner=owner).order_by("-created_at", "-id").values_list("pk", flat=True))


def test_json_lines_hold_every_own_job_once_newest_first_across_chunks(alice, bob, api_client_for, monkeypatch):
    monkeypatch.setattr(export, "CHUNK_ROWS", 7)  # many chunk edges, several inside a run of ties
    monkeypatch.setattr(export, "PIECE_ROWS", 5)
    _jobs(alice, 50)
    _jobs(bob, 4)
    response = api_client_for(alice).get("/api/v1/jobs/export")
    assert response.status_code == 200 and response["Content-Type"] == "application/jsonl"
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [row["id"] for row in rows] == _newest_first(alice)
    assert rows[0]["name"].startswith("job-") and "created_at" in rows[0] and "spec" not in rows[0]


@pytest.mark.parametrize("accept", ["application/x-ndjson", "application/jsonl"])
def test_json_lines_are_asked_for_by_either_common_name(alice, api_client_for, accept):
    _jobs(alice, 3)
    response = api_client_for(alice).get("/api/v1/jobs/export", HTTP_ACCEPT=accept)
    assert response.status_code == 200 and response["Content-Type"] == accept
    rows = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert [row["id"] for row in rows] == _newest_first(alice)


def test_csv_has_a_header_every_row_and_no_formula_cells(alice, api_client_for, monkeypatch):
    monkeypatch.setattr(export, "CHUNK_ROWS", 4)
    _jobs(alice, 9)
    Job.objects.filter(pk=_newest_first(alice)[0]).update(name="=HYPERLINK(1)")
    response = api_client_for(alice).get("/api/v1/jobs/export?as=csv")
    assert response["Content-Type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert [int(row["id"]) for row in table] == _newest_first(alice)
    assert table[0]["name"] == "'=HYPERLINK(1)"
    by_accept = api_client_for(alice).get("/api/v1/jobs/export", HTTP_ACCEPT="text/csv")
    assert by_accept["Content-Type"].startswith("text/csv")


def test_the_export_needs_credentials(client):
    assert client.get("/api/v1/jobs/export").status_code in (401, 403)


@pytest.mark.django_db(transaction=True)
def test_the_asgi_path_streams_the_same_rows(alice, monkeypatch):
    monkeypatch.setattr(export, "CHUNK_ROWS", 6)
    _jobs(alice, 20)

    async def collect():
        return "".join([piece async for piece in export.async_stream(alice.pk, export.JsonLines)])

    rows = [json.loads(line) for line in async_to_sync(collect)().splitlines()]
    assert [row["id"] for row in rows] == _newest_first(alice)


def test_an_empty_format_is_refused_not_read_as_none(alice, api_client_for):
    # DRF would read `?format=` as no format given; the schema lists the formats there are.
    response = api_client_for(alice).get("/api/v1/jobs/export?format=")
    assert response.status_code == 400
    assert response.json()["errors"]["format"] == ["One of: json, jsonl, ndjson, csv."]
