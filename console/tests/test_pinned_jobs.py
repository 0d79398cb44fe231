"""Operational jobs go through the same claim-and-comment submission as users' jobs, so the
mirror seeing one first attaches it instead of recording it a second time."""

import pytest

from cluster.clusters.services import rest_client
from console.actions.pinned_jobs import submit_pinned_job
from jobs import actions, protocol
from jobs.mirror.passes import mirror_jobs
from jobs.models import Job, JobState
from jobs.tasks import submission_for, submit_claimed
from testing.slurm import wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
SCRIPT = "#!/bin/bash\nhostname\n"


def test_a_pinned_job_carries_the_comment_and_runs_on_its_node(alice, provision, slurm):
    provision(alice)
    job = submit_pinned_job(
        alice, name="pinned", script=SCRIPT, node="gpu-4090-02", tres_per_node="gres/gpu:rtx4090:1", minutes=2
    )
    assert job.state == JobState.PENDING and job.slurm_job_id
    in_slurm = slurm.get_job(job.slurm_job_id)
    assert in_slurm.comment == protocol.slurm_comment(job)
    done = wait_for_state(slurm, job.slurm_job_id, {"COMPLETED"})
    assert done.nodes == "gpu-4090-02"
    assert job.spec == {} and job.pinned["node"] == "gpu-4090-02"  # never offered as a clone


def test_the_mirror_seeing_it_first_attaches_it_once(alice, provision, slurm):
    profile = provision(alice)
    job = actions.create_pinned_job(
        alice, name="pinned-race", script=SCRIPT, node="gpu-4090-01", tres_per_node="gres/gpu:rtx4090:1", minutes=2
    )
    # The worker's submission reached Slurm, and the mirror ran before it recorded the id.
    protocol.prepare_job_directory(job, profile.cluster_uid, profile.cluster_gid)
    slurm_job_id = slurm.as_user(job.cluster_user).submit_job(submission_for(job))
    mirror_jobs(rest_client())
    job.refresh_from_db()
    assert job.slurm_job_id == slurm_job_id and job.state != JobState.SUBMITTING
    assert Job.objects.filter(slurm_job_id=slurm_job_id).count() == 1
    # The worker's late attempt neither fails nor submits again.
    assert submit_claimed(job.pk) == "not-claimable"
    assert [j.job_id for j in slurm.list_jobs() if j.comment == protocol.slurm_comment(job)] == [slurm_job_id]


def test_a_refused_pinned_job_raises_and_records_why(alice, provision):
    from cluster.errors import SlurmError

    provision(alice)
    with pytest.raises(SlurmError):
        submit_pinned_job(
            alice, name="nowhere", script=SCRIPT, node="no-such-node", tres_per_node="gres/gpu:rtx4090:1", minutes=2
        )
    failed = Job.objects.get(name="nowhere")
    assert failed.state == JobState.SUBMIT_FAILED and failed.error
