"""`__any_of`: the same rows as `__in`, one array parameter on PostgreSQL."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

import foundation.lookups  # noqa: F401
from jobs.models import Job

pytestmark = pytest.mark.django_db


def test_any_of_finds_what_in_finds_and_binds_one_parameter(alice):
    for slurm_job_id in (11, 12, 13, 14):
        Job.objects.create(owner=alice, slurm_job_id=slurm_job_id, state="PENDING")
    Job.objects.create(owner=alice, state="SUBMITTING")  # no Slurm id
    wanted = [12, 14, 99] + list(range(1000, 6000))
    with CaptureQueriesContext(connection) as queries:
        found = sorted(Job.objects.filter(slurm_job_id__any_of=wanted).values_list("slurm_job_id", flat=True))
    assert found == sorted(Job.objects.filter(slurm_job_id__in=wanted).values_list("slurm_job_id", flat=True))
    assert found == [12, 14]
    if connection.vendor == "postgresql":
        assert "= ANY(" in queries.captured_queries[0]["sql"]  # one array, not 5,003 placeholders

    rest = Job.objects.filter(slurm_job_id__isnull=False).exclude(slurm_job_id__any_of=wanted)
    assert sorted(rest.values_list("slurm_job_id", flat=True)) == [11, 13]
    assert not Job.objects.filter(slurm_job_id__any_of=[]).exists()
