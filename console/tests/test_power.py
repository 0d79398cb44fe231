"""The power policy without the cluster: night mode's SuspendTime, standby nodes at peak, energy
from the mirror's power spans, admins' keep-on; the Slurm commands it would run are recorded
(SlurmCli in noop mode). The cluster part is console/tests/test_power_live.py."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from cluster.actions.mirror import record_power_states
from cluster.commands.cli import SlurmCli
from cluster.models import Node, NodePowerSpan
from console.actions import power
from console.models import PowerDecision, PoweredOnPin
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db

NIGHT = datetime(2026, 12, 2, 23, 0, tzinfo=UTC)
DAY = datetime(2026, 12, 2, 11, 0, tzinfo=UTC)


@pytest.fixture
def cli(monkeypatch):
    recorder = SlurmCli(prefix=[], noop=True)
    monkeypatch.setattr(power, "slurm_cli", lambda: recorder)
    return recorder


@pytest.fixture
def h100(db):
    return Node.objects.create(
        name="gpu-h100-01", state="IDLE", gpus=[{"type": "h100", "count": 2, "used_indexes": []}]
    )


def _commands(cli) -> list[str]:
    return [" ".join(command) for command in cli.executed]


def test_idle_nodes_are_powered_down_by_the_windows_rule_and_pinned_or_busy_ones_are_not(cli, settings, h100):
    settings.TIME_ZONE = "UTC"
    settings.POWER_NIGHT_SUSPEND_SECONDS, settings.POWER_DAY_SUSPEND_SECONDS = 600, 0
    Node.objects.filter(pk=h100.pk).update(idle_since=NIGHT - timedelta(minutes=11))
    Node.objects.create(name="gpu-a100-01", state="IDLE", idle_since=NIGHT - timedelta(minutes=5))  # not long enough
    Node.objects.create(name="gpu-a100-02", state="MIXED")  # busy: no idle_since
    Node.objects.create(name="gpu-4090-01", state="IDLE", idle_since=NIGHT - timedelta(hours=1))
    PoweredOnPin.objects.create(node="gpu-4090-01")
    power.apply_power_policy(DAY)  # by day: never
    assert _commands(cli) == []
    power.apply_power_policy(NIGHT)
    assert _commands(cli) == ["scontrol update NodeName=gpu-h100-01 State=POWER_DOWN Reason=gpupool: idle for 600 s"]
    assert PowerDecision.objects.get().kind == PowerDecision.Kind.POWERED_DOWN


def test_the_nodes_the_night_powered_down_are_powered_up_when_a_day_without_an_idle_rule_begins(cli, settings, h100):
    settings.TIME_ZONE = "UTC"
    settings.POWER_NIGHT_SUSPEND_SECONDS, settings.POWER_DAY_SUSPEND_SECONDS = 600, 0
    idle_reason = f"{power.IDLE_REASON_PREFIX} 600 s"
    Node.objects.filter(pk=h100.pk).update(state_flags="POWERED_DOWN", reason=idle_reason)
    Node.objects.create(name="gpu-a100-01", state="IDLE", state_flags="POWERED_DOWN", reason="broken fan")
    Node.objects.create(name="gpu-a100-02", state="IDLE", state_flags="POWERED_DOWN", reason=power.STANDBY_REASON)
    Node.objects.create(name="gpu-4090-01", state="MIXED", reason=idle_reason)  # woken by a job already
    power.apply_power_policy(NIGHT)  # at night they stay down
    assert _commands(cli) == []
    power.apply_power_policy(DAY)
    assert _commands(cli) == ["scontrol update NodeName=gpu-h100-01 State=POWER_UP"]
    assert PowerDecision.objects.get().kind == PowerDecision.Kind.POWERED_UP
    # A day with its own idle rule leaves them down until a job wakes one.
    settings.POWER_DAY_SUSPEND_SECONDS = 3600
    cli.executed.clear()
    power.apply_power_policy(DAY)
    assert _commands(cli) == []


def test_the_mirror_keeps_when_a_node_became_idle(h100):
    from cluster.actions.mirror import mirror_nodes
    from cluster.records.types import Node as SlurmNode

    class Client:
        def __init__(self, alloc):
            self.alloc = alloc

        def list_nodes(self):
            state = ("IDLE",) if not self.alloc else ("MIXED",)
            return [SlurmNode("gpu-h100-01", state, "", (), ("gpu",), 16, self.alloc, 1000, 0, (), 0, 0)]

    mirror_nodes(Client(0))
    first = Node.objects.get(name="gpu-h100-01").idle_since
    assert first is not None
    mirror_nodes(Client(0))
    assert Node.objects.get(name="gpu-h100-01").idle_since == first  # kept, not moved on
    mirror_nodes(Client(4))
    assert Node.objects.get(name="gpu-h100-01").idle_since is None


def _pending(n: int, gpu_type: str = "h100"):
    for index in range(n):
        Job.objects.create(name=f"w{index}", state=JobState.PENDING, gpu_type=gpu_type)


def test_a_standby_node_goes_down_when_nothing_waits_and_wakes_past_the_peak_queue(cli, settings, h100):
    settings.POWER_STANDBY_NODES, settings.POWER_PEAK_QUEUE = ["gpu-h100-01"], 2
    power.apply_power_policy(DAY)
    assert "scontrol update NodeName=gpu-h100-01 State=POWER_DOWN_ASAP Reason=gpupool standby" in _commands(cli)[-1]
    # Powered down, Slurm lifts the drain (24.11): the policy drains it again.
    Node.objects.filter(pk=h100.pk).update(state_flags="POWERED_DOWN", reason=power.STANDBY_REASON)
    cli.executed.clear()
    power.apply_power_policy(DAY)
    assert _commands(cli) == ["scontrol update NodeName=gpu-h100-01 State=DRAIN Reason=" + power.STANDBY_REASON]
    Node.objects.filter(pk=h100.pk).update(state_flags="DRAIN,POWERED_DOWN", reason=power.STANDBY_REASON)
    _pending(2)  # not more than the peak queue: it stays down
    cli.executed.clear()
    power.apply_power_policy(DAY)
    assert not any("gpu-h100-01" in command for command in _commands(cli))
    _pending(1, "h100")
    _pending(5, "a100")  # another type's queue does not count
    power.apply_power_policy(DAY)
    assert _commands(cli)[-2:] == [
        "scontrol update NodeName=gpu-h100-01 State=RESUME",
        "scontrol update NodeName=gpu-h100-01 State=POWER_UP",
    ]
    woken = PowerDecision.objects.get(kind=PowerDecision.Kind.WOKEN)
    assert (woken.node, woken.queue_length) == ("gpu-h100-01", 3)


def test_a_drain_an_admin_set_is_not_taken_for_standby(cli, settings, h100):
    settings.POWER_STANDBY_NODES, settings.POWER_PEAK_QUEUE = ["gpu-h100-01"], 0
    Node.objects.filter(pk=h100.pk).update(state_flags="DRAIN", reason="broken fan")
    _pending(3)
    power.apply_power_policy(DAY)
    assert not any("RESUME" in command for command in _commands(cli))


def test_power_spans_follow_the_mirror_and_energy_counts_the_hours_powered_down(h100, settings):
    settings.NODE_HOST_IDLE_WATTS = 100
    start = DAY - timedelta(hours=10)
    record_power_states({"gpu-h100-01": "on"}, now=start)
    record_power_states({"gpu-h100-01": "on"}, now=start + timedelta(hours=1))  # no change, no span
    record_power_states({"gpu-h100-01": "off"}, now=start + timedelta(hours=2))
    record_power_states({"gpu-h100-01": "on"}, now=start + timedelta(hours=5))
    assert NodePowerSpan.objects.count() == 3
    saved = power.energy_saved(DAY - timedelta(days=1), DAY)
    # 3 h x (2 H100 x 70 W idle + 100 W host) = 720 Wh.
    assert saved.hours_off == Decimal("3.00") and saved.kwh == Decimal("0.720")
    # A window that cuts the span counts only its part.
    assert power.energy_saved(start + timedelta(hours=4), DAY).hours_off == Decimal("1.00")


def test_keep_on_pins_the_node_in_slurm_and_powers_it_up(cli, admin_user, h100):
    power.keep_on("gpu-h100-01", admin_user, keep=True)
    assert _commands(cli) == [
        "scontrol update SuspendExcNodes=gpu-h100-01",
        "scontrol update NodeName=gpu-h100-01 State=POWER_UP",
    ]
    power.keep_on("gpu-h100-01", admin_user, keep=False)
    assert not PoweredOnPin.objects.exists()
    assert _commands(cli)[-1].startswith("scontrol update SuspendExcNodes=")


def test_the_operations_page_shows_power_and_only_admins_may_act(client, alice, admin_user, h100, cli):
    client.force_login(alice)
    assert client.post("/console/nodes/gpu-h100-01/power", {"action": "keep_on"}).status_code in (302, 403)
    assert not PoweredOnPin.objects.exists()
    client.force_login(admin_user)
    page = client.get("/console/operations/").content.decode()
    assert "data-power" in page and "gpu-h100-01" in page
    answer = client.post("/console/nodes/gpu-h100-01/power", {"action": "keep_on"})
    assert answer.status_code == 302
    assert PoweredOnPin.objects.filter(node="gpu-h100-01").exists()
