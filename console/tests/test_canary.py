"""The canary after a change, on the real cluster: a short job on each node starts a container in the
pool's runtime and checks its GPU; every healthy node passes; a node whose container cannot start
fails and is drained with the reason; a window that ended gets its canary once; only admins start one."""

import subprocess
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client, slurm_cli
from cluster.models import Node
from console.actions import canary
from console.models import CanaryCheck, CanaryRun, MaintenanceWindow, SlurmctldStart
from jobs.mirror.passes import mirror_jobs
from testing.slurm import wait_for


@pytest.mark.pure
@pytest.mark.parametrize("runtime", ["pyxis", "none"])
def test_the_script_is_valid_bash_and_takes_only_an_image_reference(runtime):
    script = canary.canary_script("nvcr.io/nvidia/pytorch:24.05-py3", runtime)
    assert subprocess.run(["bash", "-n"], input=script, text=True).returncode == 0
    assert ("--container-image='nvcr.io#nvidia/pytorch:24.05-py3'" in script) == (runtime == "pyxis")
    with pytest.raises(canary.CanaryRefused):
        canary.canary_script("x'; rm -rf / #", runtime)


def _settled(run: CanaryRun) -> list[CanaryCheck]:
    wait_for(
        # The mirror (the beat's, in the portal) brings the jobs' ends; then each check's verdict.
        lambda: (
            mirror_jobs(rest_client()) is not None
            and canary.settle() is not None
            and not run.checks.filter(state=CanaryCheck.State.RUNNING).exists()
        ),
        what="every canary check settled",
        timeout=240,
    )
    return list(run.checks.order_by("node"))


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_healthy_nodes_pass_and_a_node_that_cannot_start_the_container_is_drained(
    admin_user, alice, provision, settings
):
    settings.SUBMIT_INLINE = True
    provision(admin_user)
    mirror_nodes(rest_client())
    run = canary.start(admin_user, CanaryRun.Trigger.MANUAL, "test")
    checks = _settled(run)
    # Every node Slurm offers (one powered down or drained by an earlier test would hold its job forever).
    offered = {node.name for node in Node.objects.all() if not node.is_unavailable}
    assert offered and {check.node for check in checks} == offered
    assert all(check.state == CanaryCheck.State.PASSED for check in checks), [(c.node, c.detail) for c in checks]

    # An image the nodes do not hold: Enroot cannot start it, the check fails, the node is drained.
    settings.CANARY_IMAGE = "nvcr.io/nvidia/pytorch:99.99-py3"
    node = sorted(offered)[0]
    try:
        (check,) = _settled(canary.start(admin_user, CanaryRun.Trigger.MANUAL, "test", nodes=[node]))
        if settings.JOB_RUNTIME == "pyxis":
            assert check.state == CanaryCheck.State.FAILED and check.drained, check.detail
            assert "container did not start" in check.detail
            assert "canary" in {n.name: n for n in rest_client().list_nodes()}[node].reason
        else:  # no runtime: the node's shell ran it, nothing to fail
            assert check.state == CanaryCheck.State.PASSED
    finally:
        slurm_cli().resume_node(node)
    browser = Client()
    browser.force_login(alice)
    assert browser.post("/console/maintenance/canary").status_code == 403
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get("/console/maintenance/").content.decode()
    assert f'data-canary-node="{node}"' in page and "data-start-canary" in page


@pytest.mark.django_db
def test_a_window_that_ended_gets_its_canary_once(admin_user, canary_submissions):
    submitted = canary_submissions
    now = timezone.now()
    window = MaintenanceWindow.objects.create(
        start=now - timedelta(hours=2), end=now - timedelta(minutes=1), nodes=["gpu-a100-01"], reason="upgrade",
        created_by=admin_user,
    )  # fmt: skip
    MaintenanceWindow.objects.create(
        start=now - timedelta(days=2), end=now - timedelta(days=1), reason="long ago", created_by=admin_user
    )
    assert canary.start_after_windows(now) == 1
    assert canary.start_after_windows(now) == 0
    window.refresh_from_db()
    assert submitted == [(window.canary_id, ["gpu-a100-01"])]
    assert window.canary.trigger == CanaryRun.Trigger.WINDOW_ENDED and window.canary.reason == "After: upgrade"


class _Booted:
    def __init__(self, at):
        self.at = at

    def slurmctld_boot_time(self):
        return self.at


@pytest.mark.django_db
def test_a_slurmctld_restart_gets_a_canary_once_and_a_first_sighting_none(admin_user, monkeypatch, canary_submissions):
    submitted = canary_submissions
    slurm = _Booted(timezone.now() - timedelta(days=2))
    monkeypatch.setattr(canary, "slurm_cli", lambda: slurm)
    assert canary.start_after_slurmctld_restart() == 0  # the first start seen: a new install, no change
    assert canary.start_after_slurmctld_restart() == 0
    assert CanaryRun.objects.count() == 0 and SlurmctldStart.objects.count() == 1
    slurm.at = timezone.now() - timedelta(minutes=1)  # restarted
    assert canary.start_after_slurmctld_restart() == 1
    assert canary.start_after_slurmctld_restart() == 0  # once
    (run,) = CanaryRun.objects.all()
    assert run.trigger == CanaryRun.Trigger.SLURMCTLD_RESTART and run.started_by == admin_user
    assert submitted == [(run.pk, None)]  # every node
    assert SlurmctldStart.objects.get(started_at=slurm.at).canary == run


@pytest.mark.slurm
def test_slurmctlds_start_time_is_read_from_the_real_daemon_in_utc():
    booted = slurm_cli().slurmctld_boot_time()
    # The dev cluster's slurmctld started with `cluster.sh up`, before this test, in the last days.
    assert timezone.now() - timedelta(days=30) < booted < timezone.now()
