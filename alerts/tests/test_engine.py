"""The article's alert: a node whose GPU memory is > 90 % for 5 minutes emails the admins,
once per episode."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail

from alerts.actions import evaluate
from alerts.defaults import ensure_default_rule
from alerts.models import Alert, AlertRule
from telemetry.actions.storage import store_samples
from telemetry.samples import GpuSample

# transaction=True: the email goes out on commit, as in production.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def default_rule():
    """What migration 0002 creates; a transactional test's flush removes it."""
    ensure_default_rule(AlertRule)


START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _tick(node: str, moment: datetime, used_fraction: float, gpus: int = 4):
    store_samples(
        [
            GpuSample(
                time=moment,
                node=node,
                index=index,
                uuid=f"GPU-{node}-{index}",
                compute_util=50,
                memory_util=40,
                # Only GPU 2 is hot: the rule looks at the node's worst GPU.
                memory_used_mb=int(40960 * (used_fraction if index == 2 else 0.3)),
                memory_total_mb=40960,
                temperature_c=60,
                power_w=200,
            )
            for index in range(gpus)
        ],
        source="test",
    )


def _run(traveller, node, seconds, used_fraction, start):
    """Sample every 10 s for `seconds`, evaluating after each sample, as beat would."""
    results = []
    for step in range(0, seconds + 1, 10):
        moment = start + timedelta(seconds=step)
        traveller.move_to(moment)
        _tick(node, moment, used_fraction)
        results.append(evaluate(moment))
    return results


def test_the_default_rule_fires_once_after_five_minutes_and_emails_admins(admin_user, alice):
    admin_user.email = "ada@pool.example"
    admin_user.save()
    with time_machine.travel(START, tick=False) as traveller:
        early = _run(traveller, "gpu-a100-01", 290, 0.95, START)
        assert all(result["opened"] == 0 for result in early)  # 4 min 50 s is not 5 minutes
        assert mail.outbox == []

        later = _run(traveller, "gpu-a100-01", 120, 0.95, START + timedelta(seconds=300))
        assert sum(result["opened"] for result in later) == 1
        assert len(mail.outbox) == 1
        assert mail.outbox[0].to == ["ada@pool.example"]  # admins only, not alice
        assert "gpu-a100-01" in mail.outbox[0].subject

        alert = Alert.objects.get()
        assert alert.is_open and alert.value >= 95

        cooled = _run(traveller, "gpu-a100-01", 60, 0.5, START + timedelta(seconds=430))
        assert sum(result["resolved"] for result in cooled) == 1
        assert not Alert.objects.get().is_open
        assert len(mail.outbox) == 1


def test_a_hot_node_within_the_cooldown_does_not_email_again(admin_user):
    admin_user.email = "ada@pool.example"
    admin_user.save()
    with time_machine.travel(START, tick=False) as traveller:
        _run(traveller, "gpu-h100-01", 310, 0.97, START)
        _run(traveller, "gpu-h100-01", 20, 0.2, START + timedelta(seconds=320))
        _run(traveller, "gpu-h100-01", 330, 0.97, START + timedelta(seconds=350))
    assert Alert.objects.count() == 1
    assert len(mail.outbox) == 1


def test_a_node_just_starting_to_report_cannot_have_been_hot_for_five_minutes(admin_user):
    with time_machine.travel(START, tick=False) as traveller:
        results = _run(traveller, "gpu-4090-01", 100, 0.99, START)
    assert all(result["opened"] == 0 for result in results)


def test_the_alert_list_is_admin_only(client, alice, admin_user):
    client.force_login(alice)
    assert client.get("/console/alerts/").status_code == 403
    client.force_login(admin_user)
    assert client.get("/console/alerts/").status_code == 200


def _idle_tick(moment: datetime, compute_of):
    store_samples(
        [
            GpuSample(
                moment, "gpu-a100-01", index, f"GPU-a100-{index}", compute_of(index, moment), 1, 500, 40960, 40, 60
            )
            for index in range(4)
        ],
        source="prometheus",  # whatever the source: the rule reads the store
    )


def test_a_gpu_a_job_holds_and_does_not_use_for_30_minutes_raises_the_idle_alert(alice):
    from alerts.defaults import ensure_idle_allocated_rule
    from jobs.models import Job

    ensure_idle_allocated_rule(AlertRule)
    AlertRule.objects.exclude(metric=AlertRule.Metric.IDLE_ALLOCATED).delete()
    Job.objects.create(
        owner=alice, slurm_job_id=9101, state="RUNNING", gpu_type="a100", start_time=START - timedelta(minutes=1),
        gpu_allocation={"gpu-a100-01": [1, 2]},
    )  # fmt: skip
    # GPU 1 computes at 2 %, GPU 2 (the same job's) is busy, GPU 0 idles at 1 % but no job holds it.
    spike = START + timedelta(minutes=10)

    def compute_of(index, moment):
        if index == 1:
            return 40.0 if moment == spike else 2.0
        return {0: 1.0, 2: 70.0, 3: 0.0}[index]

    with time_machine.travel(START, tick=False) as traveller:
        opened = []
        for step in range(0, 45 * 60 + 1, 30):
            moment = START + timedelta(seconds=step)
            traveller.move_to(moment)
            _idle_tick(moment, compute_of)
            if evaluate(moment)["opened"]:
                opened.append(moment)
    # The spike at 10 min restarts the 30 minutes: open 30 min after it, not before, and once.
    assert len(opened) == 1 and opened[0] - spike >= timedelta(minutes=30), opened
    alert = Alert.objects.get()
    assert alert.node == "gpu-a100-01" and alert.value == 2.0
    assert "held by a running job" in alert.detail and "under 5 %" in alert.detail
