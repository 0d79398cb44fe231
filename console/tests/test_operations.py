"""Operations figures: utilisation and queue-wait maths, hardware ROI, the admin page, and
the accounting query against the real dev cluster."""

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from zoneinfo import ZoneInfo

import pytest
from django.urls import path

from cluster.errors import SlurmAuthError, SlurmTransientError
from cluster.models import Node
from cluster.records.accounting import gpus_allocated_at
from cluster.records.types import AccountingRecord
from cluster.slurmrest.client import SlurmRestClient
from cluster.slurmrest.registry import adapter_for
from console import operations as ops
from console.views import operations as views_operations
from gpupool.urls import urlpatterns as project_urlpatterns

# The page under test at a path of its own, ahead of the project's URLs, so the tests do
# not depend on console/urls.py having its line yet (and keep working once it does).
OPERATIONS_URL = "/test-operations/"
urlpatterns = [path(OPERATIONS_URL.strip("/") + "/", views_operations.operations), *project_urlpatterns]

DAY1 = datetime(2026, 11, 2, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=1)
DAY3 = DAY2 + timedelta(days=1)
UNSET = datetime.fromtimestamp(4294967294, tz=UTC)  # slurmdbd's start of a job that never started


def record(
    job_id=1,
    *,
    submit=None,
    start=None,
    end=None,
    gpus=1,
    gpu_type="a100",
    states=("COMPLETED",),
    nodes="gpu-a100-01",
    tres=None,
):
    if tres is None:
        tres = {"node": 1, "gres/gpu": gpus, f"gres/gpu:{gpu_type}": gpus} if gpus else {"node": 1}
    elapsed = int((end - start).total_seconds()) if start and end and end >= start else 0
    return AccountingRecord(
        job_id=job_id,
        user_name="alice",
        account="portal",
        qos="pro",
        states=tuple(states),
        submit_time=submit or start,
        start_time=start,
        end_time=end,
        elapsed_seconds=elapsed,
        allocated_tres=tres,
        nodes=nodes,
        exit_code=0,
    )


def never_started(job_id=9, *, submit, gpus=1, state="CANCELLED"):
    """What slurmdbd really records for a job cancelled (or refused) while pending."""
    return record(job_id, submit=submit, start=UNSET, end=submit, gpus=gpus, states=(state,), nodes="None assigned")


# --- utilisation -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "ratio, label",
    [(None, "–"), (0.0, "0 %"), (0.00000004, "< 0.01 %"), (0.0001, "0.01 %"), (0.8325, "83.25 %"), (1.0, "100 %")],
)
def test_percent_labels_never_show_a_small_share_as_zero(ratio, label):
    assert views_operations.percent_label(ratio) == label


def test_gpu_hour_labels_never_show_a_few_seconds_as_zero():
    assert [views_operations.gpu_hours_label(s) for s in (0, 5, 36, 5400)] == ["0", "< 0.01", "0.01", "1.5"]


def test_days_are_cut_from_the_start_and_the_last_one_ends_at_the_end():
    bounds = ops.bucket_bounds(DAY1, DAY3 + timedelta(hours=6), "day")
    assert bounds == [(DAY1, DAY2), (DAY2, DAY3), (DAY3, DAY3 + timedelta(hours=6))]
    assert len(ops.bucket_bounds(DAY1, DAY1 + timedelta(weeks=8), "week")) == 8
    with pytest.raises(ValueError):
        ops.bucket_bounds(DAY1, DAY2, "month")


def test_a_job_spanning_midnight_is_split_between_the_two_days():
    job = record(start=DAY2 - timedelta(hours=2), end=DAY2 + timedelta(hours=3), gpus=2)
    first, second = ops.pool_utilisation([job], 4, DAY1, DAY3, "day", now=DAY3)
    assert first.allocated_gpu_seconds == 2 * 2 * 3600
    assert second.allocated_gpu_seconds == 2 * 3 * 3600
    assert first.available_gpu_seconds == second.available_gpu_seconds == 4 * 86400
    assert first.utilisation == pytest.approx(4 * 3600 / (4 * 86400))
    assert second.utilisation == pytest.approx(6 * 3600 / (4 * 86400))


def test_utilisation_is_allocated_over_available_gpu_seconds():
    jobs = [
        record(1, start=DAY1, end=DAY1 + timedelta(hours=12), gpus=4),  # 48 GPU-hours
        record(2, start=DAY1 + timedelta(hours=6), end=DAY1 + timedelta(hours=18), gpus=2),  # 24 GPU-hours
        record(3, start=DAY1, end=DAY1 + timedelta(hours=5), gpus=0, tres={"node": 1, "gres/shard": 3}),
    ]
    (day,) = ops.pool_utilisation(jobs, 8, DAY1, DAY2, "day", now=DAY3)
    assert day.allocated_gpu_seconds == 72 * 3600
    assert day.available_gpu_seconds == 8 * 24 * 3600
    assert day.utilisation == pytest.approx(72 / 192)


def test_utilisation_by_gpu_type_against_the_inventory_of_each_type():
    jobs = [
        record(1, start=DAY1, end=DAY1 + timedelta(hours=6), gpus=2, gpu_type="a100"),
        record(2, start=DAY1, end=DAY1 + timedelta(hours=12), gpus=1, gpu_type="h100"),
    ]
    (day,) = ops.pool_utilisation(jobs, {"a100": 8, "h100": 2, "rtx4090": 8}, DAY1, DAY2, "day", now=DAY3)
    assert day.available_gpu_seconds == 18 * 86400
    assert day.by_type["a100"].allocated_gpu_seconds == 12 * 3600
    assert day.by_type["a100"].utilisation == pytest.approx(12 / (8 * 24))
    assert day.by_type["h100"].utilisation == pytest.approx(12 / (2 * 24))
    assert day.by_type["rtx4090"].utilisation == 0
    assert day.utilisation == pytest.approx(24 / (18 * 24))


def test_a_running_job_counts_up_to_now_and_never_started_jobs_count_nothing():
    now = DAY1 + timedelta(hours=10)
    jobs = [
        record(1, start=DAY1 + timedelta(hours=8), end=None, gpus=1, states=("RUNNING",)),
        never_started(2, submit=DAY1 + timedelta(hours=1)),
        # A requeued run that was cancelled while pending keeps the GPUs it asked for in
        # its TRES (seen on the dev cluster): its unset start must still rule it out.
        never_started(3, submit=DAY1 + timedelta(hours=2), gpus=4),
        record(4, submit=DAY1 + timedelta(hours=9), start=None, end=None, states=("PENDING",), nodes=""),
    ]
    (day,) = ops.pool_utilisation(jobs, 4, DAY1, DAY2, "day", now=now)
    assert day.allocated_gpu_seconds == 2 * 3600


def test_gpus_allocated_now_are_the_runs_that_started_and_have_not_ended():
    now = DAY1 + timedelta(hours=10)
    jobs = [
        record(1, start=DAY1 + timedelta(hours=8), end=None, gpus=2, states=("RUNNING",)),
        record(2, start=DAY1 + timedelta(hours=9), end=None, gpus=1, gpu_type="h100", states=("RUNNING",)),
        record(3, start=DAY1, end=DAY1 + timedelta(hours=9), gpus=4),  # finished before now
        never_started(4, submit=DAY1 + timedelta(hours=2), gpus=4),
        record(5, start=now + timedelta(minutes=5), end=None, gpus=1, states=("RUNNING",)),  # a clock ahead
        record(6, start=DAY1, end=None, gpus=1, states=("RUNNING",), tres={"node": 1, "gres/gpu": 1}),
        record(7, start=DAY1, end=None, gpus=0, states=("RUNNING",), tres={"node": 1, "gres/shard": 3}),
    ]
    assert gpus_allocated_at(jobs, now) == {"": 1, "a100": 2, "h100": 1}
    assert gpus_allocated_at(jobs, DAY1 + timedelta(hours=8, minutes=30)) == {"": 1, "a100": 6}
    assert gpus_allocated_at([], now) == {}


def test_a_job_running_before_the_window_counts_only_inside_it():
    job = record(start=DAY1 - timedelta(days=3), end=DAY1 + timedelta(hours=1), gpus=1)
    (day,) = ops.pool_utilisation([job], 1, DAY1, DAY2, "day", now=DAY3)
    assert day.allocated_gpu_seconds == 3600


def test_a_local_day_across_a_dst_change_has_its_real_length():
    berlin = ZoneInfo("Europe/Berlin")
    start = datetime(2026, 3, 29, tzinfo=berlin)  # clocks go forward: a 23-hour day
    (day,) = ops.pool_utilisation([], 2, start, datetime(2026, 3, 30, tzinfo=berlin), "day", now=DAY3)
    assert day.available_gpu_seconds == 2 * 23 * 3600


# --- queue wait --------------------------------------------------------------------------
def test_waits_are_averaged_per_day_of_the_start_and_never_started_jobs_are_left_out():
    def started(job_id, submit, wait_minutes):
        begin = submit + timedelta(minutes=wait_minutes)
        return record(job_id, submit=submit, start=begin, end=begin + timedelta(minutes=30))

    jobs = [
        started(1, DAY1 + timedelta(hours=1), 10),
        started(2, DAY1 + timedelta(hours=2), 20),
        started(3, DAY1 + timedelta(hours=3), 60),
        # submitted on day 1, started on day 2 after 2 hours: day 2's wait
        started(4, DAY2 - timedelta(hours=1), 120),
        never_started(5, submit=DAY1 + timedelta(hours=4)),
        never_started(6, submit=DAY2 + timedelta(hours=4), state="FAILED"),
        record(7, submit=DAY2 + timedelta(hours=5), start=None, end=None, states=("PENDING",), nodes=""),
    ]
    first, second = ops.queue_wait(jobs, DAY1, DAY3, "day", now=DAY3)
    assert first.jobs == 3
    assert first.average_wait_seconds == 30 * 60
    assert first.p95_wait_seconds == 60 * 60
    assert second.jobs == 1 and second.average_wait_seconds == 2 * 3600
    overall = ops.overall_wait(jobs, DAY1, DAY3, now=DAY3)
    assert overall.jobs == 4 and overall.average_wait_seconds == (10 + 20 + 60 + 120) * 60 / 4


def test_a_day_without_started_jobs_has_no_wait():
    (day,) = ops.queue_wait([never_started(submit=DAY1)], DAY1, DAY2, "day", now=DAY3)
    assert day.jobs == 0 and day.average_wait_seconds is None and day.p95_wait_seconds is None


def test_p95_is_the_nearest_rank():
    assert ops.percentile(list(range(1, 101)), 0.95) == 95
    assert ops.percentile([5, 1, 3], 0.95) == 5
    assert ops.percentile([], 0.95) is None


# --- ROI ---------------------------------------------------------------------------------
def test_roi_of_the_article_configs_follows_the_formula_not_the_articles_column():
    results = {inputs.name: ops.roi_of(inputs) for inputs in ops.ARTICLE_CONFIGS}
    assert {name: result.roi for name, result in results.items()} == {
        "8x RTX 4090": Decimal("2.77"),
        "4x A100": Decimal("1.97"),
        "2x H100": Decimal("1.41"),
    }
    assert [str(result.roi) for result in results.values()] != ["2.1", "1.8", "1.2"]
    rtx = results["8x RTX 4090"]
    assert rtx.monthly_margin == Decimal("2770") and rtx.period_margin == Decimal("33240")
    assert rtx.hardware_cost == Decimal("12000") and rtx.months == 12
    assert rtx.payback_months == Decimal("4.3")


def test_roi_is_decimal_and_rounds_half_up():
    result = ops.roi(Decimal("96"), 0, 0, 1, months=12)  # 12 / 96 = 0.125 exactly
    assert isinstance(result.roi, Decimal) and result.roi == Decimal("0.13")
    assert ops.roi("1000", "0", "0", "100", months=6).roi == Decimal("0.60")
    assert ops.roi(1000, 200, 0, 100).roi == Decimal("-1.20")
    assert ops.roi(1000, 200, 0, 100).payback_months is None


@pytest.mark.parametrize(
    "arguments",
    [(0, 1, 1, 1), (-5, 1, 1, 1), (100, -1, 1, 1), (100, 1, 1, -1), (100, 1, 1, 1, 0), (100, 1, 1, "NaN")],
)
def test_roi_refuses_impossible_inputs(arguments):
    with pytest.raises(ValueError):
        ops.roi(*arguments)


def test_roi_refuses_floats_for_money():
    with pytest.raises(TypeError):
        ops.roi(12000.0, 280, 150, 3200)


# --- the accounting query ----------------------------------------------------------------
class _Response:
    status_code = 200
    text = '{"jobs": []}'

    def json(self):
        return {"jobs": [], "errors": []}


class _Session:
    def __init__(self):
        self.calls = []

    def request(self, method, url, **kwargs):
        self.calls.append((method, url, kwargs["params"]))
        return _Response()


class _Minter:
    def token_for(self, user_name):
        return "token"


def test_list_accounting_sends_the_window_as_zone_less_utc_seconds():
    """slurmrestd 24.11 refuses an offset, a Z or a fraction (error 9202)."""
    session = _Session()
    client = SlurmRestClient("http://slurm", adapter_for("v0.0.41"), _Minter(), user_name="slurm", session=session)
    start = datetime(2026, 11, 29, 21, 51, 0, 250000, tzinfo=ZoneInfo("Europe/Berlin"))
    end = datetime(2026, 11, 29, 20, 52, 0, 1, tzinfo=UTC)
    assert client.list_accounting(start, end) == []
    ((method, url, params),) = session.calls
    assert method == "GET" and url == "http://slurm/slurmdb/v0.0.41/jobs/"
    assert params == {"start_time": "2026-11-29T20:51:00", "end_time": "2026-11-29T20:52:01"}


# --- the page ----------------------------------------------------------------------------
class FakeAccounting:
    def __init__(self, records=(), error=None):
        self.records = list(records)
        self.error = error
        self.windows = []

    def list_accounting(self, start, end):
        self.windows.append((start, end))
        if self.error:
            raise self.error
        return self.records


@pytest.fixture
def accounting(monkeypatch):
    fake = FakeAccounting()
    monkeypatch.setattr(views_operations, "rest_client", lambda *args, **kwargs: fake)
    return fake


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_plain_user_gets_403(client, alice, accounting):
    client.force_login(alice)
    assert client.get(OPERATIONS_URL).status_code == 403
    assert accounting.windows == []


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_anonymous_visitors_are_sent_to_log_in(client, accounting):
    response = client.get(OPERATIONS_URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_the_admin_sees_utilisation_and_waits_of_the_last_7_days(client, admin_user, accounting):
    Node.objects.create(name="gpu-a100-01", state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    Node.objects.create(name="gpu-h100-01", state="IDLE", gpus=[{"type": "h100", "count": 2, "used_indexes": []}])
    now = datetime.now(UTC)
    begin = now - timedelta(hours=1)
    accounting.records = [
        record(1, submit=begin - timedelta(minutes=10), start=begin, end=begin + timedelta(minutes=30), gpus=2),
        never_started(2, submit=begin),
    ]
    client.force_login(admin_user)
    response = client.get(OPERATIONS_URL)
    assert response.status_code == 200
    (start, end) = accounting.windows[0]
    assert timedelta(days=6) <= end - start <= timedelta(days=7)
    body = response.content.decode()
    chart = json.loads(body.split('<script id="operations-data" type="application/json">')[1].split("</script>")[0])
    assert len(chart["labels"]) == 7 and chart["bucket"] == "day"
    assert set(chart["by_type"]) == {"a100", "h100"}
    assert 'id="operations-data"' in body and "js/operations.js" in body and "/static/vendor/plotly.min.js" in body
    assert 'id="utilisation-chart"' in body and 'id="wait-chart"' in body
    summary = response.context["figures"]["summary"]
    assert summary["jobs"] == 1 and summary["average_wait"] == "10 min 00 s"
    assert summary["allocated_gpu_hours"] == 1.0
    # The article's three configs, computed by the formula, with their inputs.
    assert "2.77" in body and "1.97" in body and "1.41" in body and "$120,000.00" in body


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_busy_pool_never_reads_zero(client, admin_user, accounting):
    """Three GPUs running for 20 minutes in an 18-GPU pool: a small share of a week, but not
    0.0 %, and "3 of 18 GPUs" allocated now. On a percent axis of 0-100."""
    for name, gpu_type, count in [
        ("gpu-4090-01", "rtx4090", 8),
        ("gpu-a100-01", "a100", 8),
        ("gpu-h100-01", "h100", 2),
    ]:
        Node.objects.create(name=name, state="MIXED", gpus=[{"type": gpu_type, "count": count, "used_indexes": []}])
    began = datetime.now(UTC) - timedelta(minutes=20)
    accounting.records = [
        record(1, start=began, end=None, gpus=2, gpu_type="a100", states=("RUNNING",)),
        record(2, start=began, end=None, gpus=1, gpu_type="rtx4090", states=("RUNNING",)),
    ]
    client.force_login(admin_user)
    response = client.get(OPERATIONS_URL)
    figures = response.context["figures"]
    assert figures["summary"]["allocated_gpu_seconds"] == pytest.approx(3 * 20 * 60, abs=30)
    assert figures["summary"]["allocated_gpu_hours"] == 1.0
    assert 0 < figures["summary"]["utilisation_percent"] < 1
    assert figures["now"]["gpus"] == 3 and figures["now"]["total"] == 18
    assert figures["now"]["percent"] == pytest.approx(100 * 3 / 18, abs=0.01)
    assert ("a100", 2, 8) in figures["now"]["by_type"]
    body = response.content.decode()
    assert 'data-allocated-now="3"' in body and "3 of 18 GPUs" in body
    chart = json.loads(body.split('<script id="operations-data" type="application/json">')[1].split("</script>")[0])
    assert chart["utilisation_range"] == [0, 100]
    assert chart["utilisation"][-1] > 0 and chart["by_type"]["a100"][-1] > chart["by_type"]["h100"][-1] == 0


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_the_percent_axis_grows_only_past_100(client, admin_user, accounting):
    # Accounting can hold GPUs of a node no longer in the mirror: more than the pool.
    Node.objects.create(name="a1", state="IDLE", gpus=[{"type": "a100", "count": 1, "used_indexes": []}])
    began = datetime.now(UTC) - timedelta(days=8)  # all through the period: 400 % of one GPU
    accounting.records = [record(1, start=began, end=None, gpus=4, states=("RUNNING",))]
    client.force_login(admin_user)
    chart = client.get(OPERATIONS_URL).context["figures"]["chart"]
    assert max(chart["utilisation"]) == 400
    assert chart["utilisation_range"] == [0, 400]


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_eight_weeks_are_shown_by_week(client, admin_user, accounting):
    client.force_login(admin_user)
    response = client.get(OPERATIONS_URL, {"period": "8w"})
    assert response.status_code == 200
    assert len(response.context["figures"]["rows"]) == 8
    (start, _end) = accounting.windows[0]
    assert start.weekday() == 0 and (start.hour, start.minute) == (0, 0)


@pytest.mark.django_db
@pytest.mark.urls(__name__)
@pytest.mark.parametrize("error", [SlurmTransientError("cannot reach slurmrestd"), SlurmAuthError("token refused")])
def test_a_slurm_failure_is_shown_on_the_page_not_a_500(client, admin_user, accounting, error):
    accounting.error = error
    client.force_login(admin_user)
    response = client.get(OPERATIONS_URL)
    assert response.status_code == 200
    body = response.content.decode()
    assert "data-slurm-error" in body and error.message in body
    assert response.context["figures"] is None and "operations-data" not in body
    assert "2.77" in body  # the ROI calculator still works


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_the_roi_form_computes_from_its_inputs(client, admin_user, accounting):
    client.force_login(admin_user)
    query = {
        "hardware_cost": "48000",
        "power_per_month": "420",
        "running_per_month": "200",
        "revenue_per_month": "8500",
        "months": "24",
    }
    response = client.get(OPERATIONS_URL, query)
    assert response.status_code == 200
    assert response.context["roi_result"].roi == Decimal("3.94")
    body = response.content.decode()
    assert "data-roi-result" in body and "$7,880.00" in body and "ROI over 24 months" in body


@pytest.mark.django_db
@pytest.mark.urls(__name__)
@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("hardware_cost", "0", "must be more than 0"),
        ("hardware_cost", "-100", "must be more than 0"),
        ("power_per_month", "-1", "cannot be negative"),
        ("revenue_per_month", "lots", "Enter a number"),
        ("running_per_month", "", "This field is required"),
        ("months", "1.5", "Enter a whole number"),
        ("months", "0", "At least 1 month"),
    ],
)
def test_bad_roi_inputs_are_form_errors(client, admin_user, accounting, field, value, message):
    client.force_login(admin_user)
    query = {
        "hardware_cost": "12000",
        "power_per_month": "280",
        "running_per_month": "150",
        "revenue_per_month": "3200",
        "months": "12",
        field: value,
    }
    response = client.get(OPERATIONS_URL, query)
    assert response.status_code == 200
    assert response.context["roi_result"] is None
    assert message in " ".join(response.context["form"].errors[field])
    body = response.content.decode()
    assert "data-roi-errors" in body and 'aria-invalid="true"' in body


@pytest.mark.django_db
def test_gpu_inventory_sums_the_node_mirror_by_type():
    Node.objects.create(name="a1", state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": [0]}])
    Node.objects.create(name="a2", state="DOWN", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    Node.objects.create(name="h1", state="MIXED", gpus=[{"type": "h100", "count": 2, "used_indexes": []}])
    Node.objects.create(name="cpu1", state="IDLE", gpus=[])
    assert ops.gpu_inventory() == {"a100": 8, "h100": 2}


# --- the real dev cluster ----------------------------------------------------------------
@pytest.mark.slurm
def test_a_gpu_job_on_the_dev_cluster_shows_in_accounting_and_in_utilisation(slurm, settings):
    from cluster.clusters.services import rest_client, slurm_cli
    from cluster.commands.provisioning import LocalProvisioner
    from testing.slurm import submission, unique_cluster_name, wait_for, wait_for_state

    provisioner = LocalProvisioner(slurm_cli(), settings.SLURM_ACCOUNT)
    name = unique_cluster_name("pto")
    provisioner.ensure_user(name, ["pro"], "pro")
    try:
        window_start = datetime.now(UTC) - timedelta(seconds=5)
        job_id = rest_client(name).submit_job(submission("sleep 3", tres_per_node="gres/gpu:a100:2", name="ops"))
        job = wait_for_state(slurm, job_id, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"}, timeout=120)
        assert job.state == "COMPLETED", job

        def accounted():
            end = datetime.now(UTC)
            for item in slurm.list_accounting(window_start, end):
                if item.job_id == job_id and item.user_name == name and item.state == "COMPLETED" and item.end_time:
                    return item, end
            return None

        mine, window_end = wait_for(accounted, timeout=60, what=f"job {job_id} in slurmdbd accounting")
        assert mine.gpu_count == 2
        assert mine.allocated_tres.get("gres/gpu:a100") == 2
        assert mine.elapsed_seconds >= 3

        records = slurm.list_accounting(window_start, window_end)
        inventory = {}
        for node in slurm.list_nodes():
            for group in node.gpus:
                inventory[group.gpu_type] = inventory.get(group.gpu_type, 0) + group.count
        job_seconds = 2 * (mine.end_time - mine.start_time).total_seconds()
        # A run across midnight gives two day buckets: add them up.
        alone = ops.pool_utilisation([mine], inventory, window_start, window_end, "day", now=window_end)
        assert sum(b.allocated_gpu_seconds for b in alone) == job_seconds
        assert sum(b.by_type["a100"].allocated_gpu_seconds for b in alone) == job_seconds
        pool = ops.pool_utilisation(records, inventory, window_start, window_end, "day", now=window_end)
        assert sum(b.allocated_gpu_seconds for b in pool) >= job_seconds > 0
        assert sum(b.by_type["a100"].allocated_gpu_seconds for b in pool) >= job_seconds
        # Whole seconds between the window's ends, each rounded down (cluster.records.accounting's unit).
        seconds = int(window_end.timestamp()) - int(window_start.timestamp())
        assert sum(b.available_gpu_seconds for b in pool) == sum(inventory.values()) * seconds
        waits = ops.queue_wait([mine], window_start, window_end, "day", now=window_end)
        assert sum(w.jobs for w in waits) == 1 and all(
            w.average_wait_seconds is None or w.average_wait_seconds >= 0 for w in waits
        )
    finally:
        slurm_cli().run("scancel", "-u", name, check=False)
        provisioner.remove_user(name)


@pytest.mark.slurm
@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_running_gpu_job_on_the_dev_cluster_counts_on_the_page_while_it_runs(client, admin_user, slurm, settings):
    """The figures while the job still runs (slurmdbd has no end for it yet): allocated now,
    and GPU-seconds from its start up to now."""
    from cluster.actions.mirror import mirror_nodes
    from cluster.clusters.services import rest_client, slurm_cli
    from cluster.commands.provisioning import LocalProvisioner
    from testing.slurm import submission, unique_cluster_name, wait_for, wait_for_state

    mirror_nodes(slurm)
    provisioner = LocalProvisioner(slurm_cli(), settings.SLURM_ACCOUNT)
    name = unique_cluster_name("ptr")
    provisioner.ensure_user(name, ["pro"], "pro")
    try:
        job_id = rest_client(name).submit_job(submission("sleep 120", tres_per_node="gres/gpu:a100:2", name="ops-run"))
        wait_for_state(slurm, job_id, {"RUNNING"}, timeout=60)

        def running_in_accounting():
            moment = datetime.now(UTC)
            return any(
                item.job_id == job_id and item.state == "RUNNING" and item.start_time and item.end_time is None
                for item in slurm.list_accounting(moment - timedelta(minutes=5), moment)
            )

        wait_for(running_in_accounting, timeout=60, what=f"job {job_id} running in slurmdbd")
        # GPU-seconds are whole seconds from the start (26.05 records a start within the second
        # it happened): let some pass, or "so far" is rightly 0.
        time.sleep(2)
        client.force_login(admin_user)
        figures = client.get(OPERATIONS_URL).context["figures"]
        assert figures is not None
        # Other tests may run jobs on the shared cluster too: at least this one's.
        assert figures["now"]["gpus"] >= 2
        assert dict((name, count) for name, count, _total in figures["now"]["by_type"]).get("a100", 0) >= 2
        assert figures["summary"]["allocated_gpu_seconds"] > 0
        # Seconds of 2 GPUs in a week of the pool is a tiny share: shown as such, never as zero.
        assert figures["summary"]["utilisation_label"] not in ("0 %", "–")
        assert figures["summary"]["allocated_label"] != "0"
    finally:
        slurm_cli().run("scancel", "-u", name, check=False)
        provisioner.remove_user(name)
