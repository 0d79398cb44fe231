"""Power saving on the dev clusters (both releases): an idle node is powered down by Slurm (its
slurmd stopped by deploy/devcluster/power/gpupool-node-power) and powered up again for a job
that needs it; a standby node is woken when more jobs wait for its GPU type than the peak
queue allows. Every test leaves every node powered up and SuspendTime back at never."""

from __future__ import annotations

import time

import pytest
from django.conf import settings

from cluster.actions.mirror import mirror_nodes
from cluster.clusters.services import rest_client, slurm_cli
from cluster.models import Node, NodePowerSpan
from conftest import subscribe
from console.actions import power
from console.models import PowerDecision, PoweredOnPin
from jobs import actions
from jobs.models import Job
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from testing.slurm import wait_for, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

NODE = "gpu-h100-01"  # the one H100 node: every H100 job needs it


def _root_file(path: str) -> str:
    local = settings.DEVCLUSTER_DIR / "root" / path.lstrip("/")
    return local.read_text() if local.exists() else ""


def _states(node: str = NODE) -> set[str]:
    return set(next(n for n in rest_client().list_nodes() if n.name == node).states)


def _all_powered_up():
    cli = slurm_cli()
    off = [n.name for n in rest_client().list_nodes() if {"POWERED_DOWN", "POWERING_DOWN"} & set(n.states)]
    for name in off:
        cli.power_node(name, "POWER_UP")
    drained = [n.name for n in rest_client().list_nodes() if "DRAIN" in n.states]
    for name in drained:
        cli.resume_node(name)
    wait_for(
        lambda: all(
            not {"POWERED_DOWN", "POWERING_DOWN", "POWERING_UP", "DRAIN", "NOT_RESPONDING"} & set(n.states)
            for n in rest_client().list_nodes()
        ),
        timeout=120,
        what="every node powered up",
    )


@pytest.fixture
def powered_up_after(slurm):
    if "SuspendProgram=" not in _root_file("/etc/slurm/slurm.conf"):
        pytest.fail("this dev cluster has no power saving (cluster.sh writes it where sudo is in the root)")
    yield
    _all_powered_up()


def _submit_h100(user, command="echo powered") -> Job:
    spec = parse_job_spec(
        {**GOOD_SPEC, "gpu_type": "h100", "command": command}, plan=plan_for(user), policy=SpecPolicy.from_settings()
    )
    job = actions.submit(user, spec)
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    return job


@pytest.fixture
def h100_user(alice, provision, settings):
    settings.SUBMIT_INLINE = True
    subscribe(alice, "enterprise")
    provision(alice)
    return alice


def _powered_down_by_the_idle_rule(settings) -> None:
    """NODE idle for the rule's second, powered down; the other nodes kept on."""
    settings.POWER_DAY_SUSPEND_SECONDS = settings.POWER_NIGHT_SUSPEND_SECONDS = 1
    mirror_nodes(rest_client())
    for other in Node.objects.exclude(name=NODE).values_list("name", flat=True):
        PoweredOnPin.objects.create(node=other)  # the portal leaves them on (Slurm's own rule is a day)
    wait_for(lambda: mirror_nodes(rest_client()) is not None and Node.objects.get(name=NODE).idle_since, what="idle")
    time.sleep(1.5)
    power.apply_power_policy()
    wait_for(lambda: "POWERED_DOWN" in _states(), timeout=120, what=f"{NODE} powered down")


def test_an_idle_node_is_powered_down_and_wakes_for_a_job_that_needs_it(h100_user, powered_up_after, settings):
    _powered_down_by_the_idle_rule(settings)
    assert f"powered down {NODE}: slurmd" in _root_file("/var/log/devcluster/power.log")
    mirror_nodes(rest_client())
    assert Node.objects.get(name=NODE).power_state == "off"
    assert NodePowerSpan.objects.filter(node=NODE, state="off", ended_at__isnull=True).exists()
    assert list(PowerDecision.objects.filter(kind="powered_down").values_list("node", flat=True)) == [NODE]

    job = _submit_h100(h100_user)
    done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"}, timeout=180)
    assert done.state == "COMPLETED" and done.nodes == NODE
    assert f"powered up {NODE}: slurmd started" in _root_file("/var/log/devcluster/power.log")


def test_a_window_without_an_idle_rule_powers_up_the_nodes_the_rule_powered_down(powered_up_after, settings):
    """The morning: Slurm keeps the rule's reason on a powered-down node (both releases), which is
    how the policy tells its own power-downs from an admin's."""
    _powered_down_by_the_idle_rule(settings)
    mirror_nodes(rest_client())
    assert Node.objects.get(name=NODE).reason.startswith(power.IDLE_REASON_PREFIX)
    settings.POWER_DAY_SUSPEND_SECONDS = settings.POWER_NIGHT_SUSPEND_SECONDS = 0
    power.apply_power_policy()
    assert list(PowerDecision.objects.filter(kind="powered_up").values_list("node", flat=True)) == [NODE]
    wait_for(lambda: not {"POWERED_DOWN", "POWERING_UP"} & _states(), timeout=120, what=f"{NODE} powered up")
    assert f"powered up {NODE}: slurmd started" in _root_file("/var/log/devcluster/power.log")


# The portal's policy; the power cycle and the rule's reason are checked on every release above.
@pytest.mark.first_release
def test_a_standby_node_wakes_when_more_jobs_wait_than_the_peak_queue(h100_user, powered_up_after, settings):
    settings.POWER_STANDBY_NODES, settings.POWER_PEAK_QUEUE = [NODE], 1

    def on_standby():
        mirror_nodes(rest_client())
        power.apply_power_policy()  # nothing waits: standby (drained, powered down once idle)
        return {"DRAIN", "POWERED_DOWN"} <= _states()

    wait_for(on_standby, timeout=120, interval=2, what=f"{NODE} on standby")
    assert PowerDecision.objects.filter(kind="standby", node=NODE).count() == 1

    jobs = [_submit_h100(h100_user, command="sleep 1") for _ in range(2)]
    wait_for(
        lambda: all(rest_client().get_job(job.slurm_job_id).state == "PENDING" for job in jobs), what="both waiting"
    )
    for job in jobs:
        Job.objects.filter(pk=job.pk).update(state="PENDING")  # as the mirror records them
    mirror_nodes(rest_client())
    power.apply_power_policy()
    for job in jobs:
        done = wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED", "FAILED"}, timeout=180)
        assert done.state == "COMPLETED" and done.nodes == NODE
    woken = PowerDecision.objects.get(kind="woken", node=NODE)
    assert woken.queue_length == 2
