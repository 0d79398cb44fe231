"""One price for every path: the quote for a run's seconds is its charge, the estimate of a run
that ends now is its charge, and the dodges a greedy customer found pay what they used.
(billing/charge_split.py is the one rule; billing/quotes.py, billing/costs.py and
billing/actions/charging.py give it the same run and cover.)"""

from __future__ import annotations

import itertools
from datetime import timedelta
from decimal import Decimal

import pytest
import time_machine
from django.utils import timezone
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from billing.actions.charging import charge
from billing.actions.credit_limits import approve_credit_limit
from billing.costs import job_costs
from billing.models import UsageRecord
from billing.quotes import quote_job
from conftest import subscribe
from credits.actions import ledger
from groups import actions as group_actions
from groups.models import GroupRole, Membership
from jobs.models import Job, JobState
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db
_job_ids = itertools.count(9_100_000)
QUOTE = "/api/v1/billing/quote"
SHARD_GB = 4  # the dev cluster's A100: 40 GB in 10 shards


def _record(user, *, seconds, gpus=0, shards=0, memory_gb=0, nvme_gb=0, end=None, job=None, qos=""):
    end = end or timezone.now()
    memory = shards * SHARD_GB * seconds if shards else memory_gb * seconds
    return UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=next(_job_ids),
        run_start=end - timedelta(seconds=seconds),
        run_end=end,
        gpu_type="a100",
        user=user,
        job=job,
        state="COMPLETED",
        qos=qos,
        seconds=seconds,
        gpu_count=gpus,
        gpu_seconds=gpus * seconds,
        shards=shards,
        gpu_memory_gb_seconds=Decimal(memory),
        gpu_memory_source="shards" if shards else ("telemetry" if memory_gb else "none"),
        nvme_gb=nvme_gb,
        nvme_gb_seconds=nvme_gb * seconds,
    )


def _charged(record) -> UsageRecord:
    assert charge(record.pk) is True
    record.refresh_from_db()
    return record


shapes = st.fixed_dictionaries(
    {
        "seconds": st.integers(1, 30 * 3600),
        "whole": st.booleans(),
        "gpus": st.integers(1, 4),
        "shards": st.integers(1, 10),
        "memory_gb": st.integers(0, 160),
        "nvme_gb": st.integers(0, 900),
        "plan": st.sampled_from(["pro", "enterprise"]),
        "credits": st.integers(0, 20_000),
    }
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes)
def test_the_quote_for_a_runs_seconds_is_its_charge(alice, shape):
    subscribe(alice, shape["plan"])
    if shape["credits"]:
        ledger.grant(alice.pk, shape["credits"], key=f"q-{next(_job_ids)}", grant_kind="signup", campaign_id=None)
    whole = shape["whole"]
    gpus, shards = (shape["gpus"], 0) if whole else (0, shape["shards"])
    # The run starts after this example's plan (examples share the database): quoted at its start.
    start = timezone.now() + timedelta(seconds=1)
    quoted = quote_job(
        alice,
        now=start,
        gpu_type="a100",
        gpu_count=gpus,
        gpu_memory_gb=shape["memory_gb"] * gpus if whole else shards * SHARD_GB,
        nvme_gb=shape["nvme_gb"],
        seconds=shape["seconds"],
    )
    run = _charged(
        _record(
            alice,
            seconds=shape["seconds"],
            gpus=gpus,
            shards=shards,
            memory_gb=shape["memory_gb"] * gpus,
            nvme_gb=shape["nvme_gb"],
            end=start + timedelta(seconds=shape["seconds"]),
        )
    )
    assert run.amount == quoted.payable, (shape, run.note)
    assert (run.included_gpu_seconds, run.credit_gpu_seconds) == (quoted.covered.included, quoted.covered.credited)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=shapes)
def test_the_estimate_of_a_run_that_ends_now_is_its_charge(bob, shape):
    subscribe(bob, shape["plan"])
    if shape["credits"]:
        ledger.grant(bob.pk, shape["credits"], key=f"e-{next(_job_ids)}", grant_kind="signup", campaign_id=None)
    now = timezone.now()
    whole = shape["whole"]
    tres = f"gres/gpu:a100:{shape['gpus']}" if whole else f"gres/shard:a100:{shape['shards']}"
    if shape["nvme_gb"]:
        tres += f",gres/nvme:{shape['nvme_gb']}"
    job = Job.objects.create(
        owner=bob, state=JobState.RUNNING, gpu_type="a100", tres_per_node=tres, qos="pro",
        start_time=now - timedelta(seconds=shape["seconds"]),
    )  # fmt: skip
    estimate = job_costs([job], now)[job.pk]
    Job.objects.filter(pk=job.pk).update(state=JobState.COMPLETED, end_time=now)
    # Telemetry is not known while a whole-GPU job runs: the same run without it.
    run = _record(
        bob,
        seconds=shape["seconds"],
        gpus=shape["gpus"] if whole else 0,
        shards=0 if whole else shape["shards"],
        nvme_gb=shape["nvme_gb"],
        end=now,
        job=job,
        qos="pro",
    )
    run = _charged(run)
    assert estimate.cost_so_far == run.amount, (shape, estimate.detail)
    assert estimate.detail.credit_gpu_seconds == run.credit_gpu_seconds


def test_a_paid_job_queued_then_a_switch_to_free_pays_the_plan_it_queued_under(bob):
    """The dodge: queue on Enterprise, switch to Free while it waits, run at Free's $0."""
    now = timezone.now()
    subscribe(bob, "enterprise")
    job = Job.objects.create(owner=bob, state=JobState.COMPLETED, gpu_type="a100", qos="enterprise")
    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        subscribe(bob, "free")
    with time_machine.travel(now + timedelta(minutes=5), tick=False):
        run = _charged(_record(bob, seconds=120, gpus=2, end=now + timedelta(minutes=4), job=job))
    assert run.plan == "enterprise" and run.amount == 240 * run.gpu_price > 0
    # Queued on Free and upgraded before it started: the dearer plan, the one at the start.
    with time_machine.travel(now + timedelta(minutes=6), tick=False):
        later = Job.objects.create(owner=bob, state=JobState.COMPLETED, gpu_type="a100", qos="free")
    with time_machine.travel(now + timedelta(minutes=7), tick=False):
        subscribe(bob, "enterprise")
    with time_machine.travel(now + timedelta(minutes=10), tick=False):
        run = _charged(_record(bob, seconds=60, gpus=1, end=now + timedelta(minutes=9), job=later))
    assert run.plan == "enterprise" and run.amount > 0


def test_the_running_estimate_follows_the_dearer_plan_too(bob):
    now = timezone.now()
    subscribe(bob, "enterprise")
    job = Job.objects.create(owner=bob, state=JobState.PENDING, gpu_type="a100", tres_per_node="gres/gpu:a100:1")
    with time_machine.travel(now + timedelta(minutes=1), tick=False):
        subscribe(bob, "free")
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, start_time=now + timedelta(minutes=2))
    job.refresh_from_db()
    estimate = job_costs([job], now + timedelta(minutes=12))[job.pk]
    assert estimate.detail.plan == "enterprise" and estimate.cost_so_far == 600 * Decimal("0.0025")


def test_the_quote_api_prices_spot_below_the_plans_price_and_refuses_unknown_fields(api_client_for, bob):
    subscribe(bob, "enterprise")
    client = api_client_for(bob)
    job = {**GOOD_SPEC, "gpu_count": 2, "time_limit_minutes": 120}
    plain = client.post(QUOTE, job, format="json")
    spot = client.post(QUOTE, {**job, "spot": True}, format="json")
    assert plain.status_code == spot.status_code == 200, (plain.content, spot.content)
    assert Decimal(spot.json()["total"]) < Decimal(plain.json()["total"])
    assert spot.json()["spot"] is True and "spot:" in spot.json()["lines"][0]["description"]
    assert spot.json()["coverage"]["covered_gpu_seconds"] == 0
    refused = client.post(QUOTE, {**job, "gpus": 2}, format="json")
    assert refused.status_code == 400 and "gpus" in refused.json()["errors"]
    for wrong in ({**job, "spot": "yes"}, {**job, "command": 5}, {**job, "seconds": 60}):
        assert client.post(QUOTE, wrong, format="json").status_code == 400, wrong


def test_a_group_job_is_quoted_at_the_groups_plan_and_a_finished_run_costs_the_quote(
    api_client_for, alice, bob, admin_user
):
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    Membership.objects.create(group=group, user=bob, role=GroupRole.MEMBER)
    group.synced_at = timezone.now()
    group.save()
    subscribe(bob, "free")
    group_actions.set_group_plan(group.pk, admin_user, "enterprise")
    client = api_client_for(bob)
    body = {"gpu_type": "a100", "gpu_count": 1, "seconds": 1800}
    own = client.post(QUOTE, {**body, "group": None}, format="json").json()
    assert (own["plan"], own["payer"], own["coverage"]["payable"]) == ("free", "you", "0.00")
    quoted = client.post(QUOTE, {**body, "group": group.pk}, format="json").json()
    assert (quoted["plan"], quoted["payer"]) == ("enterprise", f"group {group.pk}")
    assert Decimal(quoted["coverage"]["payable"]) > 0
    # A group the caller is not in is refused, not quoted at the caller's plan.
    outsider = api_client_for(admin_user).post(QUOTE, {**body, "group": group.pk}, format="json")
    assert outsider.status_code == 400 and "group" in outsider.json()["errors"]


def test_a_finished_pay_per_second_runs_cost_is_the_quotes_total_for_its_gpu_seconds(api_client_for, bob):
    subscribe(bob, "enterprise")
    job = Job.objects.create(owner=bob, state=JobState.COMPLETED, gpu_type="a100", tres_per_node="gres/gpu:a100:1")
    _charged(_record(bob, seconds=1234, gpus=1, job=job))
    cost = job_costs([job])[job.pk]
    quoted = (
        api_client_for(bob)
        .post(QUOTE, {"gpu_type": "a100", "gpu_count": 1, "seconds": cost.detail.gpu_seconds}, format="json")
        .json()
    )
    assert Decimal(quoted["total"]) == cost.cost


def test_a_sweep_beyond_what_the_credit_limit_leaves_is_refused_with_the_figures(api_client_for, bob):
    subscribe(bob, "enterprise")
    approve_credit_limit(bob, Decimal("0.05"), actor=None, reason="trial")
    bob.profile.cluster_username, bob.profile.provisioned_at = "bob", timezone.now()
    bob.profile.save()
    body = {**GOOD_SPEC, "time_limit_minutes": 60, "parameters": {"lr": [1, 2, 3]}}
    answer = api_client_for(bob).post("/api/v1/sweeps/", body, format="json")
    assert answer.status_code == 403, answer.content
    assert "could cost up to $27.00" in answer.json()["detail"] and "leaves $0.05" in answer.json()["detail"]
    assert not Job.objects.filter(owner=bob).exists()


def test_queued_and_running_work_count_against_the_credit_limit(bob):
    from billing.actions.credit_limits import credit_limit_check, outstanding_work
    from jobs.submission.checks import SubmissionRefused, WorkAsked
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from plans.catalog import plan_for

    subscribe(bob, "enterprise")
    approve_credit_limit(bob, Decimal("10.00"), actor=None, reason="trial")
    policy = SpecPolicy.from_settings()
    spec = parse_job_spec({**GOOD_SPEC, "time_limit_minutes": 30}, plan=plan_for(bob), policy=policy)
    credit_limit_check(bob, plan_for(bob), None, WorkAsked(spec))  # $4.50 of $10.00: allowed
    for _ in range(2):  # two such jobs queued: $9.00 owed at most
        Job.objects.create(
            owner=bob, state=JobState.PENDING, gpu_type="a100", tres_per_node="gres/gpu:a100:1", time_limit_minutes=30
        )
    assert outstanding_work(bob) == Decimal("9.00")
    with pytest.raises(SubmissionRefused, match="leaves \\$1.00"):
        credit_limit_check(bob, plan_for(bob), None, WorkAsked(spec))
