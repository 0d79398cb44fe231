"""A job whose nodes still boot is not RUNNING: Slurm says RUNNING flagged CONFIGURING while a
powered-down node resumes, and the page showed RUNNING with a ticking cost, then the start jumped
and the cost fell back when Slurm really started it (jobs/mirror/rows.py)."""

from dataclasses import replace
from datetime import timedelta

import pytest

from billing.costs import job_costs
from cluster.slurmrest.v0041 import V0041Adapter
from cluster.tests.test_v0041_adapter import captured
from jobs.mirror import rows
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db
RUNNING = V0041Adapter().decode_jobs(captured("job_running")[1])[0]


def test_a_job_on_a_booting_node_waits_with_its_reason_and_costs_nothing_until_it_starts(alice):
    booting = replace(RUNNING, job_id=8101, states=("RUNNING", "CONFIGURING"), user_name="alice")
    Job.objects.create(owner=alice, cluster_user="alice", slurm_job_id=8101, state=JobState.PENDING,
                       slurm_states="PENDING")  # fmt: skip
    assert rows.apply_slurm_job(booting)
    job = Job.objects.get(slurm_job_id=8101)
    assert (job.state, job.state_reason) == (JobState.PENDING, rows.BOOTING_REASON)
    assert job.slurm_states == "RUNNING,CONFIGURING"
    assert job.pk not in job_costs([job])  # no cost ticks while the node boots
    started = replace(booting, states=("RUNNING",), start_time=booting.start_time + timedelta(seconds=24))
    assert rows.apply_slurm_job(started)
    job.refresh_from_db()
    assert job.state == JobState.RUNNING and job.start_time == started.start_time
