"""A job placed on the other dev cluster generation (docs/clusters.md): `any` asks both real
schedulers for their estimates, picks the one where it starts first while the portal's own
cluster's A100s are held, says why, and the job runs there as the user's own account on that
cluster; its state comes through that cluster's mirror pass, its logs from its job root, and its
run is metered and charged under that cluster's name."""

import time
from dataclasses import replace
from pathlib import Path

import pytest

from billing.models import UsageRecord
from billing.usage.metering import run_metering
from cluster.clusters.services import slurm_cli
from console.heatmap import build_shared_heatmap
from jobs.models import Job
from jobs.tasks import run_further_sync
from jobs.tests.conftest import GOOD_SPEC
from testing.slurm import a100s_held, remove_cluster_user, wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]
OTHER = "site-b"


@pytest.fixture
def site_b(settings, other_generation):
    settings.EXTRA_CLUSTERS = (replace(other_generation, name=OTHER),)
    settings.SUBMIT_INLINE = True
    return settings.EXTRA_CLUSTERS[0]


def test_any_cluster_runs_where_it_starts_first_and_says_why(
    alice, provision, site_b, own_a100s_held, api_client_for, settings, eager_tasks
):
    profile = provision(alice)
    client = api_client_for(alice)
    try:
        spec = {**GOOD_SPEC, "command": "echo hello from the job && sleep 3", "cluster": "any"}
        response = client.post("/api/v1/jobs/", spec, format="json")
        assert response.status_code == 201, response.content
        shown = response.json()
        assert shown["cluster"] == OTHER, shown
        # The reason names both estimates: site-b now, the own cluster once an A100 is free.
        assert shown["placement"].startswith(f"{OTHER} can start it now, "), shown["placement"]
        assert f"{settings.SLURM_CLUSTER_NAME} at " in shown["placement"]
        assert shown["slurm_job_id"], shown  # submitted inline, to site-b's slurmrestd

        account = profile.cluster_accounts.get(cluster=OTHER)
        assert account.provisioned_at is not None and account.uid is not None

        def ended():
            run_further_sync(OTHER)
            job = Job.objects.get(pk=shown["id"])
            return job if job.state == "COMPLETED" else None

        job = wait_for(ended, timeout=150, interval=1, what="the job completed on site-b")
        assert job.cluster == OTHER and job.nodes
        # site-b's pass took a snapshot of its nodes: the heatmap shows them after the own cluster's.
        shown_clusters = [node["c"] for node in build_shared_heatmap()["nodes"]]
        assert OTHER in shown_clusters
        assert shown_clusters == sorted(shown_clusters, key=lambda name: name != settings.SLURM_CLUSTER_NAME)
        logs = client.get(f"/api/v1/jobs/{job.pk}/logs").json()
        assert "hello from the job" in logs["stdout"], logs
        # The portal's own cluster never heard of it.
        assert not Job.objects.on_cluster().filter(slurm_job_id=job.slurm_job_id, owner=alice).exists()

        def metered():
            run_metering()
            return UsageRecord.objects.filter(cluster=OTHER, job=job).first()

        record = wait_for(metered, timeout=90, interval=2, what="site-b's run metered")
        assert record.user_id == alice.pk and record.gpu_type == "a100" and record.seconds >= 3
        assert record.gpu_seconds == record.seconds and record.charged_at is not None and record.plan == "pro"
        assert not UsageRecord.objects.filter(cluster=settings.SLURM_CLUSTER_NAME, job=job).exists()

        # Deactivated: locked on site-b too (no association, no shell), made again by a next job there.
        from accounts.actions import lifecycle

        lifecycle.deactivate(alice, actor=None, reason="left the lab")
        other_cli = slurm_cli(OTHER)
        assert other_cli.show_association(profile.cluster_username).stdout.strip() == ""
        shell = other_cli.run("getent", "passwd", profile.cluster_username).stdout.strip().split(":")[-1]
        assert shell == "/usr/sbin/nologin"
        assert profile.cluster_accounts.get(cluster=OTHER).provisioned_at is None
    finally:
        remove_cluster_user(profile.cluster_username, cluster=OTHER)


def test_a_job_only_the_own_cluster_can_run_is_refused_elsewhere_and_stays_home_with_any(
    alice, provision, site_b, api_client_for, settings
):
    provision(alice)
    client = api_client_for(alice)
    refused = client.post("/api/v1/jobs/", {**GOOD_SPEC, "cluster": OTHER, "spot": True}, format="json")
    assert refused.status_code == 400
    assert refused.json()["errors"]["cluster"] == [
        f"This job runs on {settings.SLURM_CLUSTER_NAME}: spot jobs take idle GPUs of the portal's own cluster."
    ]
    unknown = client.post("/api/v1/jobs/", {**GOOD_SPEC, "cluster": "nowhere"}, format="json")
    assert unknown.status_code == 400 and "nowhere" in unknown.json()["errors"]["cluster"][0]
    assert not Job.objects.exists()  # nothing recorded for either

    home = client.post("/api/v1/jobs/", {**GOOD_SPEC, "cluster": "any", "spot": True}, format="json")
    assert home.status_code == 201, home.content
    assert home.json()["cluster"] == settings.SLURM_CLUSTER_NAME
    assert home.json()["placement"].endswith("spot jobs take idle GPUs of the portal's own cluster.")


def test_a_cluster_that_returns_is_caught_up_without_duplicates(
    alice, provision, site_b, api_client_for, settings, other_generation
):
    from urllib.parse import urlsplit

    from cluster.clusters import probing
    from testing.tcp_forwarder import TcpForwarder

    profile = provision(alice)
    client = api_client_for(alice)
    target = urlsplit(other_generation.slurmrestd_url)
    try:
        with TcpForwarder(target.hostname, target.port) as path:
            settings.EXTRA_CLUSTERS = (replace(site_b, slurmrestd_url=path.url),)
            probing.probe_all()
            spec = {**GOOD_SPEC, "command": "echo hello from the job && sleep 3", "cluster": OTHER}
            response = client.post("/api/v1/jobs/", spec, format="json")
            assert response.status_code == 201, response.content
            job_id = response.json()["id"]
            assert response.json()["placement"] == f"You chose {OTHER}."
            path.stop()  # site-b's network goes while the job runs there
            probing.probe_all()
        assert _state_of(client, OTHER) == "stale"
        stale_job = Job.objects.get(pk=job_id)
        time.sleep(5)  # it ends on site-b meanwhile; the portal cannot hear of it
        run_further_sync(OTHER)  # a cluster not answering is not asked: nothing moves
        assert Job.objects.get(pk=job_id).state == stale_job.state != "COMPLETED"

        settings.EXTRA_CLUSTERS = (site_b,)  # back, on its own address
        settings.CLUSTER_PROBE_FAILING_INTERVAL_SECONDS = 0
        probing.probe_all()
        assert _state_of(client, OTHER) == "up"
        job = wait_for(
            lambda: run_further_sync(OTHER) and Job.objects.filter(pk=job_id, state="COMPLETED").first(),
            timeout=60,
            interval=1,
            what="site-b's job caught up",
        )
        for _ in range(2):
            run_further_sync(OTHER)  # passes repeated change nothing and add nothing
        assert Job.objects.on_cluster(OTHER).filter(slurm_job_id=job.slurm_job_id).count() == 1
        assert Job.objects.get(pk=job_id).state == "COMPLETED"
    finally:
        remove_cluster_user(profile.cluster_username, cluster=OTHER)


def _state_of(client, name):
    return {row["name"]: row for row in client.get("/api/v1/clusters/").json()}[name]["state"]


def test_a_waiting_job_moves_once_where_it_starts_sooner_and_is_audited(
    alice, provision, site_b, own_a100s_held, api_client_for, settings
):
    from audit.models import AuditLog
    from cluster.clusters.services import rest_client
    from jobs import moves
    from jobs.tasks import run_sync

    settings.JOB_MOVE_AFTER_SECONDS = 0
    profile = provision(alice)
    client = api_client_for(alice)
    site_b_root = Path(site_b.cli_prefix[-1])  # "chroot <root>"
    try:
        # Both clusters' A100s held, site-b's longer: the portal places it at home, where it waits.
        with a100s_held(site_b_root, slurm_cli(OTHER), 60):
            spec = {**GOOD_SPEC, "command": "echo hello from the job && sleep 3", "cluster": "any"}
            shown = client.post("/api/v1/jobs/", spec, format="json").json()
            assert shown["cluster"] == settings.SLURM_CLUSTER_NAME, shown
            old_id = shown["slurm_job_id"]
            # Once slurmctld's backfill pass has an expected start for it, site-b is no sooner yet.
            stays = wait_for(
                lambda: (outcome := moves.consider(shown["id"])).outcome != "no-estimate" and outcome,
                timeout=90,
                interval=2,
                what="Slurm's expected start of the waiting job",
            )
            assert stays.outcome == "stays", stays
            job = Job.objects.get(pk=shown["id"])
            assert job.movable and job.state == "PENDING"
        # site-b's A100s are free now: 30 minutes sooner than at home.
        outcome = moves.consider(job.pk)
        assert outcome.outcome == "moved", outcome
        job.refresh_from_db()
        assert (job.cluster, job.moved_from, job.movable) == (OTHER, settings.SLURM_CLUSTER_NAME, False)
        assert job.placement.startswith(f"Moved from {settings.SLURM_CLUSTER_NAME} at ")
        assert job.slurm_job_id and job.state == "PENDING"
        assert rest_client().get_job(old_id).state == "CANCELLED"  # the one it left behind
        entry = AuditLog.objects.get(action="job.move", target=f"job {job.pk}")
        assert entry.succeeded and entry.before["slurm_job_id"] == old_id and entry.after["cluster"] == OTHER

        assert moves.consider(job.pk).outcome == "not-movable"  # once, ever
        run_sync()  # the portal's own mirror sees the old Slurm job: no job of its own
        assert Job.objects.filter(owner=alice).count() == 1

        def ended():
            run_further_sync(OTHER)
            return Job.objects.filter(pk=job.pk, state="COMPLETED").first()

        done = wait_for(ended, timeout=150, interval=1, what="the moved job completed on site-b")
        assert done.cluster == OTHER
        assert "hello from the job" in client.get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"]
    finally:
        remove_cluster_user(profile.cluster_username, cluster=OTHER)
