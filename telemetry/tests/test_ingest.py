"""Agents' batches: authenticated per node, validated strictly, stored within bounds."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.test import Client

from telemetry.actions.storage import roll_up
from telemetry.models import GpuHour, GpuLatest, GpuMinute, GpuSampleRaw, NodeToken

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)


def _batch(node="gpu-a100-01", moment=NOW, gpus=4, **overrides):
    sample = {
        "index": 0,
        "uuid": "GPU-1",
        "compute_util": 87.0,
        "memory_util": 40.0,
        "memory_used_mb": 30000,
        "memory_total_mb": 40960,
        "temperature_c": 65.0,
        "power_w": 250.5,
    }
    samples = [{**sample, "index": i, "uuid": f"GPU-{i}", "time": moment.isoformat(), **overrides} for i in range(gpus)]
    return {"node": node, "agent": "nvml", "samples": samples}


def _post(body, token):
    return Client().post(
        "/api/v1/telemetry/ingest",
        json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


@time_machine.travel(NOW, tick=False)
def test_a_node_token_stores_samples_and_the_latest_row_per_gpu():
    token = NodeToken.issue("gpu-a100-01")
    response = _post(_batch(), token)
    assert response.status_code == 202 and response.json()["accepted"] == 4
    assert GpuSampleRaw.objects.count() == 4
    latest = GpuLatest.objects.get(node="gpu-a100-01", index=2)
    assert latest.compute_util == 87.0 and latest.memory_used_mb == 30000 and latest.source == "nvml"
    later = _batch(moment=NOW + timedelta(seconds=10), compute_util=12.0)
    with time_machine.travel(NOW + timedelta(seconds=10), tick=False):
        assert _post(later, token).status_code == 202
    assert GpuLatest.objects.count() == 4  # one row per GPU, overwritten
    assert GpuLatest.objects.get(node="gpu-a100-01", index=2).compute_util == 12.0


@time_machine.travel(NOW, tick=False)
def test_a_token_cannot_report_for_another_node_or_be_forged():
    token = NodeToken.issue("gpu-a100-01")
    assert _post(_batch(node="gpu-h100-01"), token).status_code == 403
    assert _post(_batch(), "gpn_forged").status_code == 401
    assert Client().post("/api/v1/telemetry/ingest", "{}", content_type="application/json").status_code == 401
    assert GpuSampleRaw.objects.count() == 0


@pytest.mark.parametrize(
    "change, message",
    [
        ({"compute_util": 150}, "compute_util"),
        ({"memory_used_mb": 50000}, "memory_used_mb"),
        ({"index": -1}, "index"),
        ({"time": "yesterday"}, "time"),
        ({"time": "2026-11-30T12:00:00"}, "time zone"),
        ({"power_w": float("nan")}, "power_w"),
        ({"compute_util": True}, "compute_util"),
    ],
)
@time_machine.travel(NOW, tick=False)
def test_a_malformed_sample_refuses_the_batch_and_stores_nothing(change, message):
    token = NodeToken.issue("gpu-a100-01")
    body = _batch()
    body["samples"][1].update(change)
    response = Client().post(
        "/api/v1/telemetry/ingest",
        json.dumps(body, allow_nan=True),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 400
    assert message in response.json()["detail"] and "samples[1]" in response.json()["detail"]
    assert GpuSampleRaw.objects.count() == 0 and GpuLatest.objects.count() == 0


@time_machine.travel(NOW, tick=False)
def test_samples_older_than_the_raw_window_are_dropped_and_counted():
    token = NodeToken.issue("gpu-a100-01")
    body = _batch(moment=NOW - timedelta(hours=3))
    assert _post(body, token).json() == {"accepted": 0, "dropped_too_old": 4}


def test_rollups_are_idempotent_and_storage_is_bounded(settings):
    token = NodeToken.issue("gpu-a100-01")
    start = datetime(2026, 11, 30, 12, 0, 0, tzinfo=UTC)
    with time_machine.travel(start, tick=False) as traveller:
        for step in range(12):  # two minutes of 10 s samples
            moment = start + timedelta(seconds=10 * step)
            traveller.move_to(moment)
            assert _post(_batch(moment=moment, compute_util=float(step * 5)), token).status_code == 202
        traveller.move_to(start + timedelta(minutes=2, seconds=5))
        first = roll_up()
        again = roll_up()
        assert first["minutes"] == again["minutes"] == 8  # 2 minutes x 4 GPUs, rewritten not doubled
        minute = GpuMinute.objects.get(node="gpu-a100-01", index=0, bucket=start)
        assert minute.samples == 6 and minute.compute_util == pytest.approx((0 + 5 + 10 + 15 + 20 + 25) / 6)
        assert GpuHour.objects.get(node="gpu-a100-01", index=0).samples == 12

        traveller.move_to(start + settings.TELEMETRY_RAW_RETENTION + timedelta(minutes=3))
        pruned = roll_up()
        assert pruned["pruned"]["raw"] == 48
        assert GpuSampleRaw.objects.count() == 0
        assert GpuMinute.objects.count() == 8  # still within its own, longer retention


@pytest.mark.django_db(transaction=True)
def test_the_asgi_fast_path_stores_a_batch_like_the_view():
    from asgiref.sync import async_to_sync
    from channels.testing import HttpCommunicator
    from django.utils import timezone

    from gpupool.asgi import application

    token = NodeToken.issue("gpu-h100-01")
    body = json.dumps(_batch(node="gpu-h100-01", moment=timezone.now(), gpus=2)).encode()

    async def post(authorization: str):
        communicator = HttpCommunicator(
            application,
            "POST",
            "/api/v1/telemetry/ingest",
            body=body,
            headers=[(b"authorization", authorization.encode()), (b"content-length", str(len(body)).encode())],
        )
        return await communicator.get_response()

    accepted = async_to_sync(post)(f"Bearer {token}")
    assert accepted["status"] == 202 and json.loads(accepted["body"]) == {"accepted": 2, "dropped_too_old": 0}
    assert GpuLatest.objects.filter(node="gpu-h100-01").count() == 2
    refused = async_to_sync(post)("Bearer gpn_wrong")
    assert refused["status"] == 401


@time_machine.travel(NOW, tick=False)
def test_the_driver_a_node_reports_is_kept_on_its_node_and_a_bad_one_refuses_the_batch():
    from cluster.models import Node

    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 4}])
    token = NodeToken.issue("gpu-a100-01")
    assert _post({**_batch(), "driver_version": "not; a driver"}, token).status_code == 400
    assert GpuSampleRaw.objects.count() == 0 and Node.objects.get().driver_version == ""
    assert _post({**_batch(), "driver_version": "535.104.05"}, token).status_code == 202
    node = Node.objects.get()
    assert (node.driver_version, node.driver_source, node.driver_reported_at) == ("535.104.05", "nvml", NOW)
    # The same report again a minute later writes nothing; an upgrade is written at once.
    with time_machine.travel(NOW + timedelta(minutes=1), tick=False):
        assert (
            _post({**_batch(moment=NOW + timedelta(minutes=1)), "driver_version": "535.104.05"}, token).status_code
            == 202
        )
        assert Node.objects.get().driver_reported_at == NOW
        assert (
            _post({**_batch(moment=NOW + timedelta(minutes=1)), "driver_version": "550.54.15"}, token).status_code
            == 202
        )
    assert Node.objects.get().driver_version == "550.54.15"
