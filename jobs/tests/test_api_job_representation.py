"""The job API's representation is written out by hand for speed (JobSerializer.to_representation):
it must say exactly what the declared fields say, for jobs of every shape."""

from datetime import timedelta

import pytest
import time_machine
from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from jobs.api.serializers import JobSerializer
from jobs.models import Job, JobDataset, JobState
from jobs.tests.test_datasets_in_jobs import _ready

pytestmark = pytest.mark.django_db


def _jobs(alice, group):
    now = timezone.now().replace(microsecond=123456)
    version = _ready(alice)
    shapes = [
        Job(owner=alice, state=JobState.SUBMITTING, spec={"gpu_count": 1, "image": "x:1"}),
        Job(
            owner=alice,
            state=JobState.PENDING,
            slurm_job_id=7_700_001,
            state_reason="Priority",
            start_time=now + timedelta(hours=1),
            end_time=now + timedelta(hours=2),
            submit_time=now,
            tres_per_node="gres/gpu:a100:2",
            gpu_type="a100",
            time_limit_minutes=60,
            group=group,
        ),
        Job(
            owner=alice,
            state=JobState.RUNNING,
            slurm_job_id=7_700_002,
            start_time=now - timedelta(minutes=7),
            end_time=now + timedelta(hours=1),
            tres_per_node="gres/gpu:a100:1",
            gpu_type="a100",
            allocated_tres="cpu=4,mem=16G,node=1,billing=4,gres/gpu=1",
            nodes="gpu-a100-01",
            qos="normal",
            account="alice",
            image="nvcr.io/nvidia/pytorch:24.05-py3",
        ),
        Job(
            owner=alice,
            state=JobState.FAILED,
            slurm_job_id=7_700_003,
            start_time=now - timedelta(hours=1),
            end_time=now,
            exit_code=3,
            elapsed_seconds=3600,
            gpu_count=1,
            error="",
            spec={1: "a"},
        ),
        Job(owner=alice, state=JobState.SUBMIT_FAILED, error="Slurm refused: no such partition"),
    ]
    jobs = []
    for job in shapes:
        job.save()
        jobs.append(job)
    JobDataset.objects.create(job=jobs[2], version=version, name="corpus", size_bytes=version.size_bytes)
    return jobs


def test_the_written_out_representation_is_the_declared_fields_one(alice, settings, tmp_path):
    from groups.models import Group

    settings.DATASET_STORE = tmp_path / "store"
    group = Group.objects.create(name="lab", slug="lab", created_by=alice)
    _jobs(alice, group)
    jobs = list(Job.objects.filter(owner=alice).prefetch_related("datasets__version").order_by("pk"))
    # One moment for both: a running job's elapsed time and cost so far are read from the clock.
    with time_machine.travel(timezone.now(), tick=False):
        fast = JobSerializer(jobs, many=True).data
        declared = JobSerializer(jobs, many=True)
        declared.child.known_costs = {}
        slow = [serializers.ModelSerializer.to_representation(declared.child, job) for job in jobs]
    assert [list(row) for row in fast] == [list(JobSerializer.Meta.fields)] * len(jobs)
    assert JSONRenderer().render(fast) == JSONRenderer().render(slow)
    # The shapes reach what they should: a cost estimate, a dataset, a group, an exit code.
    running, failed = fast[2], fast[3]
    assert running["cost_so_far"] is not None and running["cost_detail"]["basis"] == "estimate"
    assert running["datasets"][0]["mounted_at"] == "/data/corpus"
    assert fast[1]["group"] == group.pk and fast[1]["expected_start"] is not None
    assert failed["exit_code"] == 3 and failed["spec"] == {"1": "a"}
