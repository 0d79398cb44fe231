"""Rolling restarts on the real cluster: two nodes restart one at a time while a job runs on a third and
is never touched, each back before the next is asked, and a canary runs on them after; a busy node waits
for its job to end, and a stop withdraws a restart not yet begun (Slurm lifts its drain). Without Slurm:
refusals change nothing, the other roles see nothing, a pass that died between its claim and Slurm is
healed by the next."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client, slurm_cli
from cluster.errors import SlurmTransientError
from cluster.models import Node
from console.actions import rolling_restart
from console.models import CanaryCheck, CanaryRun, RollingRestart, RollingRestartStep
from console.tasks import advance_rolling_restarts
from console.tests.test_canary import _settled
from console.tests.test_maintenance import _submit
from jobs import actions
from jobs.mirror.passes import mirror_jobs
from testing.slurm import wait_for, wait_for_state

Step = RollingRestartStep.State


def _slurm_nodes() -> dict:
    return {node.name: node for node in rest_client().list_nodes()}


def settled_and_idle(names: list[str]) -> None:
    """Wait until Slurm has the nodes idle and responding: an earlier test's jobs there end first
    (a container job's cleanup can keep a node completing for a while)."""
    wait_for(
        lambda: all(set(node.states) <= {"IDLE"} for name, node in _slurm_nodes().items() if name in names),
        timeout=120,
        interval=1,
        what=f"{', '.join(names)} idle",
    )


def put_back(names: list[str]) -> None:
    """After a failure: no reboot left asked and no node left drained for the tests after this one."""
    cli = slurm_cli()
    for name in names:
        cli.run("scontrol", "cancel_reboot", name, check=False)
        cli.run("scontrol", "update", f"NodeName={name}", "State=RESUME", check=False)


def _drive(restart: RollingRestart, *, timeout: float = 180, watch=None) -> RollingRestart:
    """The beat's passes (the mirror, console.tasks.advance_rolling_restarts) every second until the
    restart ends."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        mirror_jobs(rest_client())  # brings a canary's job ends
        advance_rolling_restarts()
        if watch:
            watch()
        restart.refresh_from_db()
        if restart.finished_at:
            return restart
        time.sleep(1)
    raise AssertionError(f"rolling restart not ended: {list(restart.steps.values_list('node', 'state', 'detail'))}")


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_two_nodes_restart_one_at_a_time_while_a_job_runs_on_another(admin_user, alice, provision, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    provision(admin_user)  # the canary after runs as the admin
    mirror_nodes(rest_client())
    running = _submit(alice, 30, command="sleep 600")
    started = wait_for_state(rest_client(), running.slurm_job_id, {"RUNNING"})
    pair = ["gpu-a100-01", "gpu-a100-02"]
    settled_and_idle(pair)
    booted_before = {name: _slurm_nodes()[name].boot_time for name in pair}
    try:
        # A tenth first (one node of two), checked by a canary before the other is asked.
        restart = rolling_restart.start(admin_user, pair, "slurmd upgrade", canary_first=True)
        seen_together = []

        def one_at_a_time():
            busy = list(restart.steps.filter(state__in=[Step.DRAINING, Step.RESTARTING]).values_list("node", flat=True))
            if len(busy) > 1:
                seen_together.append(busy)

        restart = _drive(restart, watch=one_at_a_time)
        assert restart.state == RollingRestart.State.DONE, restart.detail
        assert seen_together == []
        first, second = restart.steps.order_by("position")
        assert (first.node, first.state, second.node, second.state) == (pair[0], Step.DONE, pair[1], Step.DONE)
        assert second.asked_at >= first.done_at  # the next only once the last was back
        gate = restart.gate
        assert gate is not None and [check.node for check in gate.checks.all()] == [pair[0]]
        assert {check.state for check in gate.checks.all()} == {CanaryCheck.State.PASSED}
        assert second.asked_at >= max(check.finished_at for check in gate.checks.all())  # it waited for the canary
        nodes = _slurm_nodes()
        for name in pair:
            node = nodes[name]
            assert node.boot_time > booted_before[name], name  # Slurm saw it boot again
            assert not {"DRAIN", "DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED"} & set(node.states), node.states
        # The job on the other node ran on, the same run: never requeued, never restarted.
        now = rest_client().get_job(running.slurm_job_id)
        assert now.state == "RUNNING" and now.start_time == started.start_time
        assert running.nodes not in pair and (now.nodes or "") not in pair

        # Then the canary, on the two nodes restarted, as the admin who asked.
        run = restart.canary
        assert run is not None and run.trigger == CanaryRun.Trigger.ROLLING_RESTART
        checks = _settled(run)
        assert [check.node for check in checks] == pair
        assert all(check.state == CanaryCheck.State.PASSED for check in checks), [c.detail for c in checks]
        assert AuditLog.objects.filter(action="rolling_restart.start", actor=admin_user).exists()
        assert AuditLog.objects.filter(action="rolling_restart.end").exists()
    finally:
        actions.cancel(running)
        put_back(pair)


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_busy_node_waits_for_its_job_and_a_stop_withdraws_its_restart(admin_user, alice, provision, settings):
    settings.SUBMIT_INLINE = True
    provision(alice)
    mirror_nodes(rest_client())
    running = _submit(alice, 30, command="sleep 600")
    busy = wait_for_state(rest_client(), running.slurm_job_id, {"RUNNING"}).nodes
    other = next(name for name in Node.objects.filter(name__startswith="gpu-4090").values_list("name", flat=True)
                 if name != busy)  # fmt: skip
    try:
        restart = rolling_restart.start(admin_user, [busy, other], "driver update")
        for _ in range(3):
            advance_rolling_restarts()
            time.sleep(1)
        first = restart.steps.get(node=busy)
        assert first.state == Step.DRAINING  # its job still runs: Slurm holds the restart
        assert restart.steps.get(node=other).state == Step.WAITING
        node = _slurm_nodes()[busy]
        assert {"DRAIN", "REBOOT_REQUESTED"} <= set(node.states) and "driver update" in node.reason
        # The mirror copies it as Slurm says it: the maintenance page lists it, as it would a site's own restart.
        mirror_nodes(rest_client())
        assert Node.objects.get(name=busy).out_of_service == "restart asked: draining until its jobs end"
        assert rest_client().get_job(running.slurm_job_id).state == "RUNNING"

        stopped = rolling_restart.stop(admin_user, restart.pk)
        assert stopped.state == RollingRestart.State.STOPPED and stopped.finished_at is not None
        assert set(stopped.steps.values_list("state", flat=True)) == {Step.SKIPPED}
        node = _slurm_nodes()[busy]
        assert not {"DRAIN", "REBOOT_REQUESTED", "REBOOT_ISSUED"} & set(node.states), node.states
        assert stopped.canary is None  # nothing was restarted
        with pytest.raises(rolling_restart.RollingRestartError):
            rolling_restart.stop(admin_user, restart.pk)

        # Asked again, the node restarts as soon as its job ends.
        again = rolling_restart.start(admin_user, [busy], "driver update")
        advance_rolling_restarts()
        assert again.steps.get().state == Step.DRAINING
        actions.cancel(running)
        again = _drive(again)
        assert again.state == RollingRestart.State.DONE and again.steps.get().state == Step.DONE
    finally:
        actions.cancel(running)
        put_back([busy, other])


# --- without Slurm ----------------------------------------------------------------------------


@pytest.fixture
def two_nodes(db):
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE")


@pytest.mark.django_db
def test_refusals_change_nothing(admin_user, two_nodes, monkeypatch):
    monkeypatch.setattr("console.tasks.advance_rolling_restart.delay", lambda pk: None)
    for nodes, reason, words in (
        ([], "upgrade", "Tick the nodes"),
        (["gpu-a100-01", "gpu-nope"], "upgrade", "no node named gpu-nope"),
        (["gpu-a100-01"], "   ", "Say why"),
    ):
        with pytest.raises(rolling_restart.RollingRestartError, match=words):
            rolling_restart.start(admin_user, nodes, reason)
    assert not RollingRestart.objects.exists() and not RollingRestartStep.objects.exists()
    rolling_restart.start(admin_user, ["gpu-a100-01"], "upgrade")
    with pytest.raises(rolling_restart.RollingRestartError, match="running already") as refused:
        rolling_restart.start(admin_user, ["gpu-a100-02"], "upgrade")
    assert refused.value.status == 409
    assert RollingRestart.objects.count() == 1 and RollingRestartStep.objects.count() == 1


@pytest.mark.django_db
def test_only_admins_see_or_start_or_stop_one(admin_user, alice, marketer, two_nodes, api_client_for, monkeypatch):
    monkeypatch.setattr("console.tasks.advance_rolling_restart.delay", lambda pk: None)
    restart = rolling_restart.start(admin_user, ["gpu-a100-01"], "upgrade")
    body = {"nodes": ["gpu-a100-02"], "reason": "mine"}
    for user in (alice, marketer):
        api = api_client_for(user)
        assert api.get("/api/v1/maintenance/restarts/").status_code == 403
        assert api.get(f"/api/v1/maintenance/restarts/{restart.pk}/").status_code == 403
        assert api.post("/api/v1/maintenance/restarts/", body, format="json").status_code == 403
        assert api.post(f"/api/v1/maintenance/restarts/{restart.pk}/stop").status_code == 403
        page = Client()
        page.force_login(user)
        asked = {"restart_nodes": ["gpu-a100-02"], "reason": "x"}
        assert page.post("/console/maintenance/restart", asked).status_code == 403
        assert page.post(f"/console/maintenance/restart/{restart.pk}/stop").status_code == 403
    restart.refresh_from_db()
    assert restart.state == RollingRestart.State.RUNNING and RollingRestart.objects.count() == 1

    api = api_client_for(admin_user)
    shown = api.get(f"/api/v1/maintenance/restarts/{restart.pk}/").json()
    assert [step["node"] for step in shown["steps"]] == ["gpu-a100-01"]
    assert shown["steps"][0]["state_words"] == "waiting for its turn"
    conflict = api.post("/api/v1/maintenance/restarts/", body, format="json")
    assert conflict.status_code == 409 and "running already" in conflict.json()["detail"]
    assert api.post("/api/v1/maintenance/restarts/", {"nodes": [], "reason": "x"}, format="json").status_code == 400
    assert api.get("/api/v1/maintenance/restarts/999999/").status_code == 404
    admin = Client()
    admin.force_login(admin_user)
    page = admin.get("/console/maintenance/").content.decode()
    assert 'data-rolling-node="gpu-a100-01"' in page and "data-stop-rolling" in page


class _Slurm:
    """What the pass reads and asks of Slurm, as the real daemon answers (states and boot times)."""

    def __init__(self, boot_time):
        self.asked: list[str] = []
        self.away = False
        self.nodes = {
            "gpu-a100-01": rolling_restart.NodeNow(frozenset({"IDLE"}), "", boot_time),
            "gpu-a100-02": rolling_restart.NodeNow(frozenset({"IDLE"}), "", boot_time),
        }

    def reboot_node(self, node, reason):
        if self.away:
            raise SlurmTransientError("scontrol reboot failed (1): Unable to contact slurm controller")
        self.asked.append(node)
        # As slurmctld marks it at once: drained, its reboot asked.
        boot_time = self.nodes[node].boot_time
        self.nodes[node] = rolling_restart.NodeNow(frozenset({"IDLE", "DRAIN", "REBOOT_REQUESTED"}), "", boot_time)

    def cancel_reboot(self, node):
        self.nodes[node] = rolling_restart.NodeNow(frozenset({"IDLE"}), "", self.nodes[node].boot_time)


@pytest.mark.django_db
def test_a_pass_that_died_before_asking_slurm_is_healed_and_nothing_is_asked_twice(admin_user, two_nodes, monkeypatch):
    monkeypatch.setattr("console.tasks.advance_rolling_restart.delay", lambda pk: None)
    long_ago = timezone.now() - timedelta(days=3)
    slurm = _Slurm(long_ago)
    monkeypatch.setattr(rolling_restart, "slurm_cli", lambda: slurm)
    monkeypatch.setattr(rolling_restart, "_nodes_now", lambda: slurm.nodes)
    restart = rolling_restart.start(admin_user, ["gpu-a100-01", "gpu-a100-02"], "upgrade")
    slurm.away = True  # slurmctld restarting: the pass asks, Slurm does not answer; nothing fails
    rolling_restart.advance(restart.pk)
    restart.refresh_from_db()
    assert restart.state == RollingRestart.State.RUNNING and restart.steps.get(position=0).state == Step.DRAINING
    slurm.away = False
    # A pass claimed the first node and died before Slurm heard of it.
    RollingRestartStep.objects.filter(restart=restart, position=0).update(state=Step.DRAINING, asked_at=timezone.now())
    rolling_restart.advance(restart.pk)
    assert slurm.asked == ["gpu-a100-01"]  # asked again: no reboot request, no new boot
    slurm.nodes["gpu-a100-01"] = rolling_restart.NodeNow(frozenset({"IDLE", "DRAIN", "REBOOT_REQUESTED"}), "", long_ago)
    rolling_restart.advance(restart.pk)
    rolling_restart.advance(restart.pk)
    assert slurm.asked == ["gpu-a100-01"]  # Slurm has it: not asked twice, the next not asked yet
    assert restart.steps.get(position=1).state == Step.WAITING
    slurm.nodes["gpu-a100-01"] = rolling_restart.NodeNow(frozenset({"IDLE"}), "", timezone.now() + timedelta(seconds=2))
    rolling_restart.advance(restart.pk)
    assert restart.steps.get(position=0).state == Step.DONE
    assert slurm.asked == ["gpu-a100-01", "gpu-a100-02"]
    # Slurm gives up on the second (ResumeTimeout): the restart fails with Slurm's reason, the node stays down.
    slurm.nodes["gpu-a100-02"] = rolling_restart.NodeNow(frozenset({"DOWN"}), "reboot timed out", long_ago)
    monkeypatch.setattr(rolling_restart.canary, "start", lambda *a, **k: None)
    rolling_restart.advance(restart.pk)
    restart.refresh_from_db()
    assert restart.state == RollingRestart.State.FAILED and "reboot timed out" in restart.detail
    assert restart.steps.get(position=1).state == Step.FAILED and restart.finished_at is not None


@pytest.mark.django_db
def test_a_canary_first_restart_waits_for_the_canary_on_its_first_tenth_and_stops_when_it_fails(
    admin_user, monkeypatch
):
    monkeypatch.setattr("console.tasks.advance_rolling_restart.delay", lambda pk: None)
    admin_user.profile.cluster_username = "ada"
    admin_user.profile.save()
    names = [f"gpu-a100-{i:02d}" for i in range(1, 13)]  # twelve nodes: a tenth is two
    for name in names:
        Node.objects.get_or_create(name=name, defaults={"state": "IDLE"})
    long_ago = timezone.now() - timedelta(days=3)
    slurm = _Slurm(long_ago)
    slurm.nodes = {name: rolling_restart.NodeNow(frozenset({"IDLE"}), "", long_ago) for name in names}
    monkeypatch.setattr(rolling_restart, "slurm_cli", lambda: slurm)
    monkeypatch.setattr(rolling_restart, "_nodes_now", lambda: slurm.nodes)
    gates = []

    def checks_only(run, nodes):  # the canary's jobs are not submitted here: each check stays running
        gates.append(nodes)
        for node in nodes:
            CanaryCheck.objects.create(run=run, node=node)

    monkeypatch.setattr(rolling_restart.canary, "_submit_checks", checks_only)

    def back(node):
        slurm.nodes[node] = rolling_restart.NodeNow(frozenset({"IDLE"}), "", timezone.now() + timedelta(seconds=2))

    for attempt, verdict in ((1, CanaryCheck.State.PASSED), (2, CanaryCheck.State.FAILED)):
        slurm.asked.clear()
        slurm.nodes = {name: rolling_restart.NodeNow(frozenset({"IDLE"}), "", long_ago) for name in names}
        restart = rolling_restart.start(admin_user, names, f"upgrade {attempt}", canary_first=True)
        for node in names[:2]:
            rolling_restart.advance(restart.pk)
            back(node)
            rolling_restart.advance(restart.pk)
        assert slurm.asked == names[:2]
        restart.refresh_from_db()
        assert restart.gate is not None and gates[-1] == names[:2]
        rolling_restart.advance(restart.pk)
        assert slurm.asked == names[:2]  # the third waits while the canary runs
        restart.gate.checks.filter(node=names[1]).update(state=verdict, detail="the container did not start")
        restart.gate.checks.filter(node=names[0]).update(state=CanaryCheck.State.PASSED)
        rolling_restart.advance(restart.pk)
        restart.refresh_from_db()
        if verdict == CanaryCheck.State.PASSED:
            assert slurm.asked == names[:3] and restart.state == RollingRestart.State.RUNNING
            rolling_restart.stop(admin_user, restart.pk)  # enough: the next attempt's canary fails
            for node in names:
                back(node)
            rolling_restart.advance(restart.pk)
        else:
            assert slurm.asked == names[:2]  # no node after the first tenth was asked
            assert restart.state == RollingRestart.State.FAILED and restart.finished_at is not None
            assert "canary on the first tenth failed" in restart.detail and names[1] in restart.detail
            skipped = restart.steps.filter(state=Step.SKIPPED).count()
            assert skipped == len(names) - 2
