"""The free plan's floor (docs/slurm.md): a free job goes to "floor,gpu", and on the dev cluster
it is first in line for the next RTX 4090 that frees while a paid job waits for the same GPU; the
same free job without the floor waits behind the paid one."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model

from cluster.clusters.services import rest_client
from conftest import subscribe
from jobs.actions import partition_for
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC
from plans.product_plans import product_plan
from testing.slurm import submission, wait_for_state


@pytest.mark.pure
def test_free_jobs_may_use_the_floor_and_paid_or_spot_jobs_never(settings):
    settings.SLURM_PARTITION, settings.SLURM_FREE_FLOOR_PARTITION = "gpu", "floor"
    assert partition_for(product_plan("free")) == "floor,gpu"
    assert partition_for(product_plan("pro")) == "gpu"
    assert partition_for(product_plan("enterprise")) == "gpu"
    assert partition_for(product_plan("free"), spot=True) == "gpu"
    assert partition_for(product_plan("free"), reserved=True) == "gpu"
    settings.SLURM_FREE_FLOOR_PARTITION = ""
    assert partition_for(product_plan("free")) == "gpu"


def _hold_gpu(cluster_user: str, seconds: int) -> int:
    return rest_client(cluster_user).submit_job(
        submission(f"sleep {seconds}", tres_per_node="gres/gpu:rtx4090:1", qos="premium", time_limit_minutes=7)
    )


def _free_job(client) -> Job:
    answer = client.post("/api/v1/jobs/", {**GOOD_SPEC, "gpu_type": "rtx4090", "command": "sleep 120"}, format="json")
    assert answer.status_code == 201, answer.content
    job = Job.objects.get(pk=answer.json()["id"])
    assert job.slurm_job_id, job.error
    return job


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_free_job_goes_before_a_waiting_paid_job_only_with_the_floor(
    alice, bob, admin_user, provision, slurm, api_client_for, settings
):
    settings.SUBMIT_INLINE = True
    subscribe(alice, "free")
    provision(alice)
    other = get_user_model().objects.create_user(username="frida", password="pw-frida", email="frida@x.org")
    subscribe(other, "free")
    provision(other)
    subscribe(bob, "enterprise")  # as the admin is: 4 RTX 4090 each at once, premium QOS
    paying = [provision(bob).cluster_username, provision(admin_user).cluster_username]
    jobs = []
    try:
        # Every RTX 4090 of the pool held by paid jobs; one of bob's ends in 20 s.
        short = _hold_gpu(paying[0], 20)
        jobs.append(short)
        jobs += [_hold_gpu(paying[0], 300) for _ in range(3)] + [_hold_gpu(paying[1], 300) for _ in range(4)]
        for job_id in jobs:
            wait_for_state(slurm, job_id, {"RUNNING"})
        waiting_paid = _hold_gpu(paying[0], 300)  # bob's next: his own limit frees with his short job
        jobs.append(waiting_paid)
        free = _free_job(api_client_for(alice))  # submitted after the paid one
        jobs.append(free.slurm_job_id)
        assert free.partition == "floor,gpu"

        wait_for_state(slurm, short, {"COMPLETED"}, timeout=60)
        # A job freed to start waits for slurmctld's next scheduling pass: at once when quiet, at
        # its backfill pass (every 30 s) on a busy machine; the order, not the speed, is the test.
        started = wait_for_state(slurm, free.slurm_job_id, {"RUNNING"}, timeout=90)
        assert started.nodes.startswith("gpu-4090")
        assert slurm.get_job(waiting_paid).state == "PENDING"

        # Without the floor: frida's free job waits in gpu alone, and when alice's ends, the GPU
        # (and the floor) go to bob's waiting paid job instead.
        settings.SLURM_FREE_FLOOR_PARTITION = ""
        unfloored = _free_job(api_client_for(other))
        jobs.append(unfloored.slurm_job_id)
        assert unfloored.partition == "gpu"
        rest_client(alice.profile.cluster_username).cancel_job(free.slurm_job_id)
        wait_for_state(slurm, waiting_paid, {"RUNNING"}, timeout=90)
        assert slurm.get_job(unfloored.slurm_job_id).state == "PENDING"
    finally:
        for job_id in jobs:
            for user in (*paying, alice.profile.cluster_username, other.profile.cluster_username):
                try:
                    rest_client(user).cancel_job(job_id)
                    break
                except Exception:  # not this user's job, or already over
                    continue
