"""The article's alert: a node whose GPU memory is > 90 % for 5 minutes emails the admins,
once per episode."""

from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core import mail

from alerts.defaults import ensure_default_rule
from alerts.engine import evaluate
from alerts.models import Alert, AlertRule
from telemetry.samples import GpuSample
from telemetry.storage import store_samples

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
