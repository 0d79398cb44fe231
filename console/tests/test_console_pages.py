"""Console pages without the dev cluster: the node page's bounded job list, and the time
charts' payloads, which carry the real range of their window (an hour, a day, 30 days)."""

import json
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from cluster.models import Node
from console.views.cluster import NODE_PAGE_JOBS, SERIES_MAX_POINTS
from console.views.home import SIGNUP_DAYS
from jobs.models import Job
from telemetry.models import GpuMinute, GpuSampleRaw

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 11, 30, 12, 0, 30, tzinfo=UTC)
NODE = "gpu-h100-01"


def _node(name=NODE):
    return Node.objects.create(name=name, state="MIXED", gpus=[{"type": "h100", "count": 2, "used_indexes": [0, 1]}])


def _job(number, owner=None, *, state="RUNNING", nodes=NODE, allocation=None, started=None):
    return Job.objects.create(
        owner=owner,
        slurm_job_id=number,
        name=f"job-{number}",
        state=state,
        nodes=nodes,
        gpu_allocation=allocation if allocation is not None else {},
        start_time=started or NOW - timedelta(minutes=number),
    )


def _node_page(client, user):
    client.force_login(user)
    return client.get(f"/console/nodes/{NODE}/")


def test_the_node_page_lists_its_running_jobs_by_node_list_or_gpu_allocation(client, alice, bob):
    _node()
    _job(1, alice, allocation={NODE: [0]})
    _job(2, bob, nodes="gpu-a100-01,gpu-h100-01")  # an item of a comma list
    _job(3, bob, nodes=f"{NODE},gpu-a100-02")
    _job(4, bob, nodes=f"gpu-a100-01,{NODE},gpu-a100-02")
    # Not on this node: a name that only starts like it, another node, a finished job.
    _job(5, bob, nodes="gpu-h100-010")
    _job(6, bob, nodes="gpu-h100-0")
    _job(7, bob, nodes="gpu-a100-01", allocation={"gpu-a100-01": [0]})
    _job(8, bob, state="COMPLETED", allocation={NODE: [1]})
    response = _node_page(client, alice)
    listed = sorted(entry["job"].slurm_job_id for entry in response.context["jobs"])
    assert listed == [1, 2, 3, 4]
    assert response.context["more_jobs"] == 0 and "data-more-jobs" not in response.content.decode()
    # bob's jobs are "in use" to alice; hers are named.
    visible = {entry["job"].slurm_job_id: entry["visible"] for entry in response.context["jobs"]}
    assert visible == {1: True, 2: False, 3: False, 4: False}


def test_a_packed_node_shows_the_first_jobs_and_counts_the_rest_in_constant_queries(client, admin_user, alice):
    _node()
    for number in range(1, 6):
        _job(number, alice, allocation={NODE: [number % 2]})
    with CaptureQueriesContext(connection) as few:
        assert _node_page(client, admin_user).status_code == 200
    extra = 7
    for number in range(6, NODE_PAGE_JOBS + extra + 1):
        _job(number, alice, allocation={NODE: [number % 2]})
    with CaptureQueriesContext(connection) as many:
        response = _node_page(client, admin_user)
    assert len(response.context["jobs"]) == NODE_PAGE_JOBS
    assert response.context["more_jobs"] == extra
    body = response.content.decode()
    assert f'data-more-jobs="{extra}"' in body and f"and {extra} more running jobs" in body
    # One more query (the count) at most, not one per job.
    assert len(many.captured_queries) <= len(few.captured_queries) + 1
    # The ones listed are those that started first.
    started = [entry["job"].start_time for entry in response.context["jobs"]]
    assert started == sorted(started) and started[0] == NOW - timedelta(minutes=NODE_PAGE_JOBS + extra)


def _series(client, user):
    client.force_login(user)
    return client.get(f"/console/nodes/{NODE}/gpus/0/series.json").json()


def _span(pair) -> timedelta:
    first, last = (datetime.fromisoformat(value) for value in pair)
    return last - first


@time_machine.travel(NOW, tick=False)
def test_a_gpu_that_reported_once_still_draws_on_an_hour_and_a_day(client, alice):
    _node()
    measurements = dict(
        compute_util=50.0,
        memory_util=20.0,
        memory_used_mb=1000,
        memory_total_mb=81920,
        temperature_c=40.0,
        power_w=90.0,
    )
    GpuSampleRaw.objects.create(node=NODE, index=0, time=NOW - timedelta(seconds=10), **measurements)
    GpuMinute.objects.create(node=NODE, index=0, bucket=NOW - timedelta(minutes=1), samples=1, **measurements)
    data = _series(client, alice)
    assert len(data["hour"]["t"]) == 1 and len(data["day"]["t"]) == 1
    assert _span(data["hour_range"]) == timedelta(hours=1)
    assert _span(data["day_range"]) == timedelta(days=1)
    assert datetime.fromisoformat(data["day_range"][1]) == NOW
    first, last = (datetime.fromisoformat(value) for value in data["hour_range"])
    assert first <= datetime.fromisoformat(data["hour"]["t"][0]) <= last


@time_machine.travel(NOW, tick=False)
def test_series_times_and_ranges_are_in_the_portals_time_zone(client, alice, settings):
    settings.TIME_ZONE = "Europe/Berlin"
    _node()
    data = _series(client, alice)
    # Plotly draws a string's wall-clock time and ignores its offset: the offset must be local.
    assert data["day_range"][1].endswith("+01:00") and datetime.fromisoformat(data["day_range"][1]) == NOW


@time_machine.travel(NOW, tick=False)
def test_the_hour_series_keeps_the_newest_points_up_to_a_cap(client, alice):
    _node()
    count = SERIES_MAX_POINTS + 25
    measurements = dict(
        compute_util=1.0, memory_util=1.0, memory_used_mb=1, memory_total_mb=100, temperature_c=30.0, power_w=50.0
    )
    # A flood (an agent sending every second, a replay): more rows than any chart needs.
    GpuSampleRaw.objects.bulk_create(
        GpuSampleRaw(node=NODE, index=0, time=NOW - timedelta(seconds=1 + step), **measurements)
        for step in range(count)
    )
    times = [datetime.fromisoformat(value) for value in _series(client, alice)["hour"]["t"]]
    assert len(times) == SERIES_MAX_POINTS
    assert times == sorted(times) and times[-1] == NOW - timedelta(seconds=1)


def _signup_chart(client, user):
    client.force_login(user)
    body = client.get("/marketing/signups/").content.decode()
    return json.loads(body.split('<script id="signups-data" type="application/json">')[1].split("</script>")[0])


@time_machine.travel(NOW, tick=False)
def test_one_day_of_sign_ups_is_drawn_on_thirty_days(client, marketer):
    users = get_user_model()
    users.objects.create_user("early", date_joined=NOW - timedelta(days=SIGNUP_DAYS + 3))
    users.objects.create_user("new1")
    users.objects.create_user("new2")
    marketer.date_joined = NOW - timedelta(days=2)  # the fixture ran before the clock was set
    marketer.save(update_fields=["date_joined"])
    chart = _signup_chart(client, marketer)
    assert len(chart["days"]) == SIGNUP_DAYS == len(chart["counts"])
    assert chart["days"][-1] == NOW.date().isoformat()
    assert chart["days"][0] == (NOW.date() - timedelta(days=SIGNUP_DAYS - 1)).isoformat()
    # Today the two new users, the marketer two days ago; the early one is outside the period.
    assert chart["counts"][-1] == 2 and chart["counts"][-3] == 1 and sum(chart["counts"]) == 3
    assert _span(chart["x_range"]) == timedelta(days=SIGNUP_DAYS)
    assert chart["x_range"][0] < chart["days"][0] and chart["x_range"][1] > chart["days"][-1]


def test_the_chart_pages_load_their_scripts(client, marketer, alice):
    client.force_login(marketer)
    assert "js/signups.js" in client.get("/marketing/signups/").content.decode()
    _node()
    client.force_login(alice)
    assert "js/gpu_charts.js" in client.get(f"/console/nodes/{NODE}/gpus/0/").content.decode()


def test_the_telemetry_page_shows_each_tables_size(client, admin_user):
    client.force_login(admin_user)
    response = client.get("/console/telemetry/")
    assert response.status_code == 200
    tables = [entry["table"] for entry in response.context["sizes"]]
    assert tables == ["telemetry_gpulatest", "telemetry_gpusampleraw", "telemetry_gpuminute", "telemetry_gpuhour"]
    assert "data-telemetry-sizes" in response.content.decode()
