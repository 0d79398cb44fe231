"""The job mirror against the real dev cluster, PostgreSQL and Redis."""

import asyncio
import time

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer

from accounts import actions
from cluster.clusters.services import rest_client
from jobs.live.events import user_group
from jobs.mirror.passes import ListingMemo, mirror_jobs, record_missing_accounting
from jobs.mirror.rows import WATCHED_FIELDS, apply_slurm_job
from jobs.models import Job
from jobs.tasks import run_sync
from testing.slurm import (
    remove_cluster_user,
    submission,
    submit_held,
    unique_cluster_name,
    wait_for,
    wait_for_state,
)

pytestmark = pytest.mark.django_db(transaction=True)
# Each test that needs the dev cluster says so (`slurm`); the others run without it.


@pytest.fixture
def provisioned_alice(alice):
    profile = actions.provision(alice.profile.pk, preferred_name=unique_cluster_name("ptm"))
    yield profile
    remove_cluster_user(profile.cluster_username)


def test_a_portal_job_whose_row_is_gone_comes_back_under_its_portal_id(alice):
    import uuid
    from dataclasses import replace

    from cluster.slurmrest.v0041 import V0041Adapter
    from cluster.tests.test_v0041_adapter import captured
    from jobs.protocol import COMMENT_PREFIX

    # A database restored from a backup older than the job: Slurm runs it, no row names it.
    lost_id = uuid.uuid4()
    running = replace(
        V0041Adapter().decode_jobs(captured("job_running")[1])[0],
        job_id=990004,
        comment=f"{COMMENT_PREFIX}{lost_id}",
    )
    assert apply_slurm_job(running) is True
    assert Job.objects.get(slurm_job_id=990004).uuid == lost_id
    # A comment naming an id a row holds (copied, or forged) takes nothing from that row.
    held = Job.objects.create(owner=alice, cluster_user="alicex", state="COMPLETED", name="mine", slurm_job_id=5)
    copied = replace(running, job_id=990005, user_name="mallory", comment=f"{COMMENT_PREFIX}{held.uuid}")
    apply_slurm_job(copied)
    assert Job.objects.get(slurm_job_id=990005).uuid != held.uuid
    assert Job.objects.filter(uuid=held.uuid).count() == 1


@pytest.mark.slurm
def test_mirror_follows_a_job_to_completion_and_records_accounting(provisioned_alice):
    client = rest_client(provisioned_alice.cluster_username)
    run_sync()  # the first pass of a fresh database catches up on the cluster's history
    job_id = client.submit_job(submission("sleep 5", tres_per_node="gres/gpu:rtx4090:1", name="mirrored"))
    states_seen = []

    def finished():
        run_sync()
        record_missing_accounting(rest_client())
        job = Job.objects.filter(slurm_job_id=job_id).first()
        if job and (not states_seen or states_seen[-1] != job.state):
            states_seen.append(job.state)
        settled = job and job.state == "COMPLETED" and "COMPLETING" not in job.slurm_states
        # Still COMPLETING while slurmctld's epilog runs: a state change of its own to come.
        return job if settled and job.elapsed_seconds is not None else None

    job = wait_for(finished, timeout=120, interval=0.5, what="the mirror to see the job complete")
    assert job.owner_id == provisioned_alice.user_id
    assert job.name == "mirrored"
    assert job.nodes.startswith("gpu-4090-")
    assert job.gpu_count == 1 and job.elapsed_seconds >= 5
    assert "RUNNING" in states_seen or "PENDING" in states_seen, states_seen

    # Idempotent: another pass with nothing new for this job leaves its row as it was. (Other
    # jobs on the shared cluster may move meanwhile, so the pass's own count proves nothing.)
    before = Job.objects.filter(pk=job.pk).values(*WATCHED_FIELDS, "updated_at").get()
    mirror_jobs(rest_client())
    assert Job.objects.filter(pk=job.pk).values(*WATCHED_FIELDS, "updated_at").get() == before


@pytest.mark.slurm
def test_an_ended_job_first_seen_without_its_nodes_gets_them_from_slurmdbd(provisioned_alice):
    """slurmctld may list a job that has just ended without its nodes (both generations); a
    row the mirror first writes in that moment learns them from slurmdbd's record."""
    from dataclasses import replace

    client = rest_client(provisioned_alice.cluster_username)
    job_id = client.submit_job(submission("true", tres_per_node="gres/gpu:rtx4090:1", name="nodeless"))
    ended = wait_for_state(client, job_id, {"COMPLETED"})
    assert ended.nodes.startswith("gpu-4090-")
    as_listed = replace(ended, nodes="", gpu_allocation={})
    assert client.ended_job_nodes(as_listed) == ended.nodes  # slurmdbd says where it ran
    assert apply_slurm_job(as_listed)
    assert Job.objects.get(slurm_job_id=job_id).nodes == ""

    def recorded():
        record_missing_accounting(rest_client())
        return Job.objects.filter(slurm_job_id=job_id, elapsed_seconds__isnull=False).first()

    row = wait_for(recorded, timeout=60, what="slurmdbd's record of the job")
    assert row.nodes == ended.nodes


@pytest.mark.slurm
def test_state_changes_are_pushed_to_the_owners_group_only(provisioned_alice, bob):
    client = rest_client(provisioned_alice.cluster_username)

    async def scenario():
        # One event loop for every receive: channels-redis binds its queues to a loop.
        layer = get_channel_layer()
        alice_channel, bob_channel = await layer.new_channel(), await layer.new_channel()
        await layer.group_add(user_group(provisioned_alice.user_id), alice_channel)
        await layer.group_add(user_group(bob.pk), bob_channel)
        job_id = await sync_to_async(client.submit_job)(submission("sleep 1", name="pushed"))
        seen = []
        deadline = time.monotonic() + 120
        while "COMPLETED" not in seen and time.monotonic() < deadline:
            await sync_to_async(run_sync)()
            try:
                message = await asyncio.wait_for(layer.receive(alice_channel), timeout=0.5)
            except TimeoutError:
                continue
            # One job's update, or many at once (a batch of new jobs: publish_job_updates).
            seen += [job["state"] for job in message.get("jobs", [message.get("job")]) if job]
        try:
            leaked = await asyncio.wait_for(layer.receive(bob_channel), timeout=0.5)
        except TimeoutError:
            leaked = None
        return job_id, seen, leaked

    job_id, seen, leaked = async_to_sync(scenario)()
    assert "COMPLETED" in seen, seen
    assert leaked is None
    assert Job.objects.get(slurm_job_id=job_id).state == "COMPLETED"


def test_a_repeated_state_writes_nothing_and_a_change_is_applied(alice):
    from dataclasses import replace

    from cluster.slurmrest.v0041 import V0041Adapter
    from cluster.tests.test_v0041_adapter import captured

    running = V0041Adapter().decode_jobs(captured("job_running")[1])[0]
    completed = V0041Adapter().decode_jobs(captured("job_completed")[1])[0]
    running = replace(running, job_id=990001)
    completed = replace(completed, job_id=990001)
    assert apply_slurm_job(running) is True
    assert apply_slurm_job(running) is False  # same state again: no write
    assert apply_slurm_job(completed) is True
    assert Job.objects.get(slurm_job_id=990001).state == "COMPLETED"
    assert Job.objects.get(slurm_job_id=990001).owner_id is None  # ptcapture is nobody's cluster user here


def test_a_new_start_estimate_without_a_state_change_is_written(alice):
    from dataclasses import replace
    from datetime import timedelta

    from cluster.slurmrest.v0041 import V0041Adapter
    from cluster.tests.test_v0041_adapter import captured

    pending = replace(V0041Adapter().decode_jobs(captured("job_running")[1])[0], job_id=990002, states=("PENDING",))
    assert apply_slurm_job(pending) is True
    later = replace(pending, start_time=pending.start_time + timedelta(minutes=20))
    assert apply_slurm_job(later) is True
    assert Job.objects.get(slurm_job_id=990002).start_time == later.start_time
    assert apply_slurm_job(later) is False


def test_a_copied_comment_does_not_bind_another_users_job(alice):
    from dataclasses import replace

    from cluster.slurmrest.v0041 import V0041Adapter
    from cluster.tests.test_v0041_adapter import captured
    from jobs.protocol import slurm_comment

    waiting = Job.objects.create(owner=alice, cluster_user="alicex", state="SUBMITTING", name="mine")
    forged = replace(
        V0041Adapter().decode_jobs(captured("job_running")[1])[0],
        job_id=990003,
        user_name="mallory",
        comment=slurm_comment(waiting),
    )
    apply_slurm_job(forged)
    waiting.refresh_from_db()
    assert waiting.slurm_job_id is None and waiting.state == "SUBMITTING"
    assert Job.objects.get(slurm_job_id=990003).owner_id is None


@pytest.mark.slurm
def test_a_job_cancelled_while_submitting_is_cancelled_in_slurm_by_the_mirror(provisioned_alice):
    from jobs.protocol import slurm_comment

    cancelled = Job.objects.create(
        owner_id=provisioned_alice.user_id, cluster_user=provisioned_alice.cluster_username, state="CANCELLED"
    )
    client = rest_client(provisioned_alice.cluster_username)
    # Its worker submitted it, then died before it could cancel it.
    job_id = client.submit_job(submission("sleep 300", comment=slurm_comment(cancelled)))
    wait_for(lambda: (run_sync() or True) and client.get_job(job_id).state == "CANCELLED", what="the orphan's cancel")
    cancelled.refresh_from_db()
    assert cancelled.slurm_job_id is None and cancelled.state == "CANCELLED"
    assert not Job.objects.filter(slurm_job_id=job_id).exists()


@pytest.mark.slurm
def test_a_burst_of_new_pending_jobs_is_read_with_squeue_not_one_request_each(provisioned_alice):
    from cluster.clusters.services import slurm_cli

    owner = rest_client(provisioned_alice.cluster_username)
    service = rest_client()
    mirror_jobs(service)  # whatever else the cluster holds is mirrored already
    ids = [submit_held(owner, name=f"burst {n}") for n in range(30)]
    asked = []
    fetch_one = service.get_job
    service.get_job = lambda job_id: asked.append(job_id) or fetch_one(job_id)
    try:
        mirror_jobs(service, queue=slurm_cli())
        rows = Job.objects.filter(slurm_job_id__in=ids)
        assert rows.count() == 30 and set(rows.values_list("state", flat=True)) == {"PENDING"}
        assert set(rows.values_list("owner_id", flat=True)) == {provisioned_alice.user_id}
        assert set(rows.values_list("gpu_type", "quota_gpus")) == {("rtx4090", 1)}
        assert not set(asked) & set(ids)  # none fetched by id
        # Read again by id (the background refresh), nothing a user watches differs.
        before = list(rows.order_by("pk").values(*WATCHED_FIELDS))
        for job_id in ids:
            apply_slurm_job(fetch_one(job_id))
        assert list(rows.order_by("pk").values(*WATCHED_FIELDS)) == before
    finally:
        slurm_cli().run("scancel", *map(str, ids), check=False)


@pytest.mark.slurm
def test_watched_pending_jobs_get_their_estimate_from_one_squeue_run_not_a_request_each(provisioned_alice):
    """The jobs someone looks at have their reason and expected start re-read every pass that
    they are due: all of them with one squeue run. Only those fields are written: the output
    paths the portal read by id stay."""
    from datetime import timedelta

    from django.utils import timezone

    from cluster.clusters.services import slurm_cli
    from jobs.live.watching import watch

    owner = rest_client(provisioned_alice.cluster_username)
    service = rest_client()
    ids = [submit_held(owner, name=f"watched {n}") for n in range(3)]
    try:
        mirror_jobs(service)  # read by id: output paths and all
        rows = Job.objects.filter(slurm_job_id__in=ids)
        assert set(rows.values_list("state_reason", flat=True)) == {"JobHeldUser"}
        paths = dict(rows.values_list("slurm_job_id", "standard_output"))
        assert all(paths.values())
        # Stale as a minute-old page would see them, and watched.
        rows.update(state_reason="Priority", updated_at=timezone.now() - timedelta(minutes=1))
        watch(rows.values_list("pk", flat=True))
        asked = []
        fetch_one = service.get_job
        service.get_job = lambda job_id: asked.append(job_id) or fetch_one(job_id)
        result = mirror_jobs(service, queue=slurm_cli())
        assert not set(asked) & set(ids)  # none fetched by id
        assert result.changed >= 3
        assert set(rows.values_list("state_reason", flat=True)) == {"JobHeldUser"}
        assert dict(rows.values_list("slurm_job_id", "standard_output")) == paths
        # Just refreshed: not due again on the next pass.
        asked.clear()
        rows.update(state_reason="Priority")
        mirror_jobs(service, queue=slurm_cli())
        assert set(rows.values_list("state_reason", flat=True)) == {"Priority"} and not set(asked) & set(ids)
    finally:
        slurm_cli().run("scancel", *map(str, ids), check=False)


@pytest.mark.slurm
def test_a_pass_with_a_memo_looks_up_changes_only_and_every_row_at_its_full_check(provisioned_alice):
    """The memo of rows in step (jobs/mirror/passes.py ListingMemo): between full checks a pass
    reads only the jobs whose listed state moved, so a row changed behind its back stays as it
    is until the next full check puts it right; a real change is written at once."""
    client = rest_client(provisioned_alice.cluster_username)
    job_id = submit_held(client)
    memo = ListingMemo()
    try:
        mirror_jobs(rest_client(), memo=memo)  # a full check: every row; the job's is new
        assert Job.objects.get(slurm_job_id=job_id).state == "PENDING"
        mirror_jobs(rest_client(), memo=memo)  # a row seen in step is remembered
        assert memo.signatures[job_id].startswith("PENDING")
        Job.objects.filter(slurm_job_id=job_id).update(state="RUNNING", slurm_states="RUNNING")
        mirror_jobs(rest_client(), memo=memo)
        assert Job.objects.get(slurm_job_id=job_id).state == "RUNNING"  # not looked up
        memo.checked_at = float("-inf")  # its full check is due
        mirror_jobs(rest_client(), memo=memo)
        assert Job.objects.get(slurm_job_id=job_id).state == "PENDING"
        client.cancel_job(job_id)
        wait_for(
            lambda: (
                mirror_jobs(rest_client(), memo=memo)
                and Job.objects.filter(slurm_job_id=job_id, state="CANCELLED").exists()
            ),
            what="a pass with the memo to write the cancel",
        )
        assert memo.signatures[job_id].startswith("CANCELLED")
    finally:
        client.cancel_job(job_id)
