"""Money per group (billing/actions/charging.py, billing/group_money.py, billing/invoice_access.py,
groups.GroupPlan): a group that holds a plan pays for its members' group runs on one invoice
with lines per member and GPU type, from its own included hours and credit pool; a run is the
group's only if the group held the plan when the run started; group-paid runs never count
against a member's own budget or credit limit; the group's budget and unpaid invoices hold
group jobs; and only the PI and managers see the group's bills (a member sees their share)."""

from __future__ import annotations

import csv
import io
import itertools
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from allauth.account.models import EmailAddress
from django.test import Client
from django.utils import timezone

from billing import group_money
from billing.actions import budgets, closing, credit_limits, invoicing
from billing.actions.charging import charge
from billing.models import Budget, Invoice, InvoiceLine, UsageRecord
from billing.usage.metering import meter_records
from conftest import subscribe
from credits import actions as credit_actions
from credits.actions import ledger
from credits.weights import BurnWeight
from groups import actions as group_actions
from groups.models import GroupBudget, GroupPlan, GroupRole, Membership
from groups.queries import GroupError
from jobs.submission.checks import SubmissionRefused
from plans.catalog import plan_for
from plans.models import Plan, PlanGpuType

pytestmark = pytest.mark.django_db

_job_ids = itertools.count(7_000_000)
JUNE = datetime(2026, 6, 15, 12, 0, tzinfo=UTC)
A100_LIST = Decimal("0.0015")  # the list card's A100 price per GPU-second (docs/product.md)


@pytest.fixture
def payg(db):
    """A plan with nothing included, list prices and no fee: what a group pays is its usage."""
    plan = Plan.objects.create(code="payg", name="Pay as you go", qos="normal", priority=1, max_job_minutes=600)
    PlanGpuType.objects.create(plan=plan, gpu_type="a100", max_concurrent=4)
    PlanGpuType.objects.create(plan=plan, gpu_type="h100", max_concurrent=2)
    return plan


@pytest.fixture
def lab(alice, bob):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    Membership.objects.create(group=group, user=bob, role=GroupRole.MEMBER)
    return group


def pays_since(group, plan_code, admin_user, since):
    """The admin gives the group a plan, dated back to `since` (runs in June 2026 are past)."""
    group_actions.set_group_plan(group.pk, admin_user, plan_code)
    GroupPlan.objects.filter(group=group).update(started_at=since)


def usage(user, *, group=None, end=JUNE, seconds=1800, gpu_type="a100", gpus=1):
    return UsageRecord.objects.create(
        cluster="test",
        slurm_job_id=next(_job_ids),
        run_start=end - timedelta(seconds=seconds),
        run_end=end,
        gpu_type=gpu_type,
        user=user,
        group=group,
        state="COMPLETED",
        seconds=seconds,
        gpu_count=gpus,
        gpu_seconds=gpus * seconds,
    )


def charged(record) -> UsageRecord:
    assert charge(record.pk) is True
    record.refresh_from_db()
    return record


def test_a_group_with_a_plan_pays_its_members_runs_on_one_invoice_with_lines_per_member_and_gpu_type(
    lab, alice, bob, admin_user, payg
):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    runs = [
        charged(usage(alice, group=lab, seconds=1800)),
        charged(usage(bob, group=lab, seconds=3600)),
        charged(usage(bob, group=lab, seconds=1200, gpu_type="h100")),
    ]
    [invoice] = {run.invoice for run in runs}
    assert (invoice.group_id, invoice.user_id) == (lab.pk, None)
    assert not Invoice.objects.filter(user__in=[alice, bob]).exists()  # nothing on the members' own
    assert {run.plan for run in runs} == {"payg"}  # the group's plan, not the members' Pro

    invoicing.refresh_draft(invoice.pk)
    lines = list(InvoiceLine.objects.filter(invoice=invoice).select_related("member"))
    usage_lines = [line for line in lines if line.kind == InvoiceLine.Kind.GPU]
    by_member = {(line.member.username, line.gpu_type): line for line in usage_lines}
    assert set(by_member) == {("alice", "a100"), ("bob", "a100"), ("bob", "h100")}
    assert by_member[("alice", "a100")].amount == Decimal("2.70")  # 1,800 s x $0.0015
    assert by_member[("bob", "a100")].amount == Decimal("5.40")
    assert by_member[("alice", "a100")].description.startswith("alice: A100")
    invoice.refresh_from_db()
    assert (
        invoice.total
        == sum(line.amount for line in lines)
        == sum((Decimal(run.amount).quantize(Decimal("0.01")) for run in runs), Decimal(0))
    )


def test_a_run_that_started_before_the_group_had_a_plan_is_the_members_to_pay(lab, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, JUNE)  # from the moment the run ends: it started before
    record = charged(usage(bob, group=lab, seconds=1800, end=JUNE + timedelta(seconds=600)))
    assert record.invoice.user_id == bob.pk and record.invoice.group_id is None
    assert record.plan == plan_for(bob).code  # priced by bob's own plan, as when it started
    later = charged(usage(bob, group=lab, seconds=600, end=JUNE + timedelta(hours=2)))
    assert later.invoice.group_id == lab.pk


def test_a_plan_given_within_the_second_a_run_started_holds_for_it(lab, bob, admin_user, payg):
    """slurmdbd records a run's start in whole seconds: a plan given at .5 s into the second the
    run started in (recorded at .0) is the group's for that run, not the member's."""
    start = JUNE.replace(microsecond=0)
    pays_since(lab, "payg", admin_user, start + timedelta(microseconds=500_000))
    record = charged(usage(bob, group=lab, seconds=600, end=start + timedelta(seconds=600)))
    assert record.run_start == start and record.invoice.group_id == lab.pk
    # The same rule at the other end: taken back within that second, it no longer holds.
    GroupPlan.objects.filter(group=lab).update(
        started_at=start - timedelta(days=1), ended_at=start + timedelta(microseconds=500_000)
    )
    again = charged(usage(bob, group=lab, seconds=300, end=start + timedelta(seconds=300)))
    assert again.invoice.user_id == bob.pk


def test_taking_the_plan_away_returns_later_runs_to_the_members(lab, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    group_actions.set_group_plan(lab.pk, admin_user, None)
    GroupPlan.objects.filter(group=lab).update(ended_at=JUNE)
    before = charged(usage(bob, group=lab, end=JUNE - timedelta(hours=1)))
    after = charged(usage(bob, group=lab, end=JUNE + timedelta(hours=2)))
    assert before.invoice.group_id == lab.pk and after.invoice.user_id == bob.pk


def test_only_an_admin_outside_the_group_sets_its_plan_and_a_capped_plan_is_refused(lab, alice, admin_user, payg):
    with pytest.raises(GroupError) as refused:
        group_actions.set_group_plan(lab.pk, alice, "payg")  # the PI may not pick what the group pays
    assert refused.value.status == 403
    with pytest.raises(GroupError) as refused:
        group_actions.set_group_plan(lab.pk, admin_user, "free")  # Slurm caps Free per user, not per group
    assert refused.value.field == "plan" and "cap" in refused.value.message
    with pytest.raises(GroupError):
        group_actions.set_group_plan(lab.pk, admin_user, "no-such-plan")
    assert not GroupPlan.objects.exists()
    Membership.objects.create(group=lab, user=admin_user, role=GroupRole.MEMBER)
    with pytest.raises(GroupError) as refused:
        group_actions.set_group_plan(lab.pk, admin_user, "payg")
    assert refused.value.status == 403 and not GroupPlan.objects.exists()


def test_setting_the_plan_held_already_changes_nothing(lab, admin_user, payg):
    first = group_actions.set_group_plan(lab.pk, admin_user, "payg")
    again = group_actions.set_group_plan(lab.pk, admin_user, "payg")
    assert first.pk == again.pk and GroupPlan.objects.count() == 1


def test_group_runs_never_count_against_a_members_own_budget_or_credit_limit(lab, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    record = charged(usage(bob, group=lab, seconds=3600))
    assert record.amount > 0
    june = datetime(2026, 6, 1).date()
    assert budgets.month_to_date_charges(bob.pk, june) == 0
    assert group_money.month_to_date_charges(lab.pk, june) == record.amount
    assert credit_limits.owed(bob.pk) == 0
    own = charged(usage(bob, seconds=600))  # bob's own job: his to pay
    assert budgets.month_to_date_charges(bob.pk, june) == own.amount


def test_the_groups_credit_pool_pays_group_runs_and_the_members_credits_are_untouched(lab, bob, admin_user, payg):
    weight = BurnWeight.objects.filter(gpu_type="a100").latest("effective_from").credits_per_gpu_second
    pool = int(weight * 1000)  # credits that cover 1,000 A100 GPU-seconds
    credit_actions.adjust(None, pool, actor=admin_user, reason="lab's pool", key="pool-1", group_id=lab.pk)
    credit_actions.adjust(bob.pk, 5000, actor=admin_user, reason="bob's own", key="bob-1")
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    record = charged(usage(bob, group=lab, seconds=1800))
    assert (record.credit_gpu_seconds, record.billable_gpu_seconds) == (1000, 800)
    assert ledger.balance(None, group_id=lab.pk) == 0
    assert ledger.balance(bob.pk) == 5000
    assert ledger.sum_of_entries(None, group_id=lab.pk) == 0
    # Charging again spends nothing twice: the record is charged once, the spend keyed by it.
    assert charge(record.pk) is False
    assert ledger.balance(bob.pk) == 5000


def test_a_pool_code_is_never_a_referral(lab, admin_user, client):
    """Every credit account has a referral code; a group pool's must not make anyone a referrer."""
    credit_actions.adjust(None, 10, actor=admin_user, reason="pool", key="pool-ref", group_id=lab.pk)
    code = ledger.account_for(None, group_id=lab.pk).referral_code
    client.get(f"/credits/r/standing?ref={code}")
    assert "credits_referrer" not in client.session


def test_a_spent_group_budget_holds_group_jobs_and_not_the_members_own(lab, alice, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, timezone.now() - timedelta(days=40))
    group_actions.save_group_budget(lab.pk, alice, monthly_amount="5", hold_at_limit=True)
    charged(usage(bob, group=lab, seconds=3600 * 2, end=timezone.now() - timedelta(minutes=1)))  # $10.80
    plan = plan_for(bob)
    with pytest.raises(SubmissionRefused, match="Vision lab.s monthly budget"):
        group_money.group_hold_check(bob, plan, lab)
    group_money.group_hold_check(bob, plan, None)  # bob's own jobs go on
    # bob's own held budget, spent, holds his own jobs but not the group's (the group pays).
    subscribe(bob, "payg")  # nothing included: his own hour costs money
    Budget.objects.create(user=bob, monthly_amount=Decimal(1), hold_at_limit=True)
    charged(usage(bob, seconds=3600, end=timezone.now() - timedelta(minutes=1)))
    with pytest.raises(SubmissionRefused):
        budgets.hold_at_limit_check(bob, plan, None)
    budgets.hold_at_limit_check(bob, plan, lab)


def test_a_member_may_not_set_the_groups_budget_and_a_bad_amount_writes_nothing(lab, alice, bob):
    with pytest.raises(GroupError) as refused:
        group_actions.save_group_budget(lab.pk, bob, monthly_amount="100", hold_at_limit=True)
    assert refused.value.status == 403
    for amount in ["", "abc", "0", "-5", "NaN", "1e9"]:
        with pytest.raises(GroupError):
            group_actions.save_group_budget(lab.pk, alice, monthly_amount=amount, hold_at_limit=False)
    assert not GroupBudget.objects.exists()


def test_the_group_budget_warns_the_pi_and_managers_once_a_month(
    lab, alice, bob, admin_user, payg, mailoutbox, django_capture_on_commit_callbacks
):
    pays_since(lab, "payg", admin_user, timezone.now() - timedelta(days=40))
    group_actions.save_group_budget(lab.pk, alice, monthly_amount="10", hold_at_limit=False)
    charged(usage(bob, group=lab, seconds=3600 * 2, end=timezone.now() - timedelta(minutes=1)))  # $10.80
    with django_capture_on_commit_callbacks(execute=True):
        assert group_money.check_group_budget(lab.pk) == 100
    with django_capture_on_commit_callbacks(execute=True):
        assert group_money.check_group_budget(lab.pk) is None
    assert len(mailoutbox) == 1 and mailoutbox[0].to == [alice.email]
    assert "100 %" in mailoutbox[0].subject


def test_an_unpaid_group_invoice_holds_group_jobs(lab, bob, admin_user, payg, settings):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    record = charged(usage(bob, group=lab, seconds=3600))
    invoicing.issue_invoice(record.invoice_id)
    settings.INVOICE_DUE_DAYS = 0  # due at once: issued a moment ago is overdue
    with pytest.raises(SubmissionRefused, match="unpaid"):
        group_money.group_hold_check(bob, plan_for(bob), lab)


def test_closing_issues_the_groups_invoice_and_still_finds_users_who_owe_only_a_fee(lab, alice, admin_user):
    # Pro has a fee: the group pays it by day like a user. A group's invoice in the month must
    # not hide the users who owe only a fee (NOT IN over a NULL user would match none).
    from django.db import transaction

    from billing.invoices.drafts import open_draft

    march, april = datetime(2026, 3, 1).date(), datetime(2026, 4, 1).date()
    alice.subscriptions.update(started_at=datetime(2026, 3, 1, tzinfo=UTC))
    pays_since(lab, "pro", admin_user, datetime(2026, 3, 1, tzinfo=UTC))
    with transaction.atomic():
        open_draft(None, datetime(2026, 4, 10, tzinfo=UTC), group_id=lab.pk)
    assert alice.pk in closing.fee_payers_without_invoice(april)
    assert closing.fee_paying_groups_without_invoice(april) == []  # it has its April draft
    assert closing.fee_paying_groups_without_invoice(march) == [lab.pk]
    result = closing.close(march, now=datetime(2026, 4, 5, tzinfo=UTC))
    group_march = Invoice.objects.get(group=lab, period=march)
    assert group_march.number in result.issued
    fee = InvoiceLine.objects.get(invoice=group_march, kind=InvoiceLine.Kind.PLAN_FEE)
    assert fee.amount == Plan.objects.get(code="pro").monthly_price
    assert Invoice.objects.filter(user=alice, period=march).exclude(status="draft").exists()


def test_voiding_a_group_invoice_redrafts_it_for_the_group(lab, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    record = charged(usage(bob, group=lab, seconds=3600))
    invoice = invoicing.issue_invoice(record.invoice_id)
    invoicing.void_invoice(invoice.pk, admin_user, "wrong address")
    record.refresh_from_db()
    assert record.invoice.group_id == lab.pk and record.invoice.replaces_id == invoice.pk


def test_metering_names_the_group_by_the_runs_slurm_account(lab, bob, admin_user, payg, settings):
    from billing.tests.test_metering import captured

    settings.SLURM_CLUSTER_NAME = "dev"  # the captured payloads' cluster, as the portal's own

    bob.profile.cluster_username = "ptcapacct"
    bob.profile.save()
    pays_since(lab, "payg", admin_user, datetime(2020, 1, 1, tzinfo=UTC))
    [record] = captured("accounting_gpu_nvme")
    in_group = replace(record, account=lab.slurm_account)
    elsewhere = replace(record, job_id=record.job_id + 1, account="portal")
    meter_records([in_group, elsewhere], cluster="dev")
    rows = {row.slurm_job_id: row for row in UsageRecord.objects.filter(cluster="dev").select_related("invoice")}
    assert rows[record.job_id].group_id == lab.pk and rows[record.job_id].invoice.group_id == lab.pk
    assert rows[record.job_id + 1].group_id is None and rows[record.job_id + 1].invoice.user_id == bob.pk


# --- who sees what ---------------------------------------------------------------------------


@pytest.fixture
def group_invoice(lab, bob, admin_user, payg):
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    record = charged(usage(bob, group=lab, seconds=3600))
    invoicing.refresh_draft(record.invoice_id)
    return record.invoice


def test_the_pi_reads_the_groups_invoice_and_a_member_or_outsider_does_not(
    group_invoice, lab, alice, bob, api_client_for, django_user_model
):
    outsider = django_user_model.objects.create_user("carol", "carol@x.org", "pw-carol")
    subscribe(outsider, "pro")
    pi = api_client_for(alice)
    body = pi.get(f"/api/v1/invoices/{group_invoice.pk}/").json()
    assert body["group"] == lab.pk
    assert {line["member"] for line in body["lines"] if line["kind"] == "gpu"} == {"bob"}
    listed = pi.get(f"/api/v1/invoices/?group={lab.pk}").json()
    assert [row["id"] for row in listed["results"]] == [group_invoice.pk]
    assert pi.get("/api/v1/invoices/").json()["results"] == []  # the PI's own list stays their own
    rows = list(csv.DictReader(io.StringIO(pi.get(f"/api/v1/invoices/{group_invoice.pk}/csv").content.decode())))
    assert {row["member"] for row in rows if row["kind"] == "gpu"} == {"bob"}

    member = api_client_for(bob)
    assert member.get(f"/api/v1/invoices/{group_invoice.pk}/").status_code == 404
    assert member.get(f"/api/v1/invoices/{group_invoice.pk}/pdf").status_code == 404
    assert member.get(f"/api/v1/invoices/?group={lab.pk}").status_code == 403
    stranger = api_client_for(outsider)
    assert stranger.get(f"/api/v1/invoices/?group={lab.pk}").status_code == 404
    assert stranger.get(f"/api/v1/invoices/{group_invoice.pk}/").status_code == 404

    page = Client()
    page.force_login(alice)
    listing = page.get("/billing/invoices/").content.decode()
    assert "Your groups&#x27; invoices" in listing or "Your groups' invoices" in listing
    detail = page.get(f"/billing/invoices/{group_invoice.pk}/").content.decode()
    assert "Vision lab (group)" in detail and "bob: A100" in detail
    page.force_login(bob)
    assert page.get(f"/billing/invoices/{group_invoice.pk}/").status_code == 404
    assert "Vision lab" not in page.get("/billing/invoices/").content.decode()


def test_a_member_sees_their_own_share_and_the_pi_sees_everyones(group_invoice, lab, alice, bob):
    june = datetime(2026, 6, 1).date()
    everyone = group_money.member_shares(lab.pk, june)
    assert [(row["user__username"], row["gpu_type"]) for row in everyone] == [("bob", "a100")]
    assert group_money.member_shares(lab.pk, june, member_id=alice.pk) == []


# --- the money page and its API ----------------------------------------------------------------


def test_the_money_api_gives_a_member_their_share_and_the_pi_everything(group_invoice, lab, alice, bob, admin_user):
    from rest_framework.test import APIClient

    def client(user):
        api = APIClient()
        api.force_authenticate(user)
        return api

    june = "2026-06"
    pi = client(alice).get(f"/api/v1/groups/{lab.pk}/money?month={june}").json()
    assert pi["plan"] == "payg" and pi["spent"] == "5.40" and pi["credit_pool"] == 0
    assert [(row["member"], row["gpu_type"], row["amount"]) for row in pi["shares"]] == [("bob", "a100", "5.40")]
    member = client(bob).get(f"/api/v1/groups/{lab.pk}/money?month={june}").json()
    assert member["spent"] is None and member["credit_pool"] is None and member["total"] == "5.40"
    assert client(alice).get(f"/api/v1/groups/{lab.pk}/money?month=June").status_code == 400


def test_budget_plan_and_pool_over_the_api_each_only_for_whom_it_is(lab, alice, bob, admin_user, payg):
    from rest_framework.test import APIClient

    def client(user):
        api = APIClient()
        api.force_authenticate(user)
        return api

    assert (
        client(bob).put(f"/api/v1/groups/{lab.pk}/budget", {"monthly_amount": "50"}, format="json").status_code == 403
    )
    refused = client(alice).put(f"/api/v1/groups/{lab.pk}/budget", {"monthly_amount": "-1"}, format="json")
    assert refused.status_code == 400 and "monthly_amount" in refused.json()["errors"]
    ok = client(alice).put(
        f"/api/v1/groups/{lab.pk}/budget", {"monthly_amount": "50", "hold_at_limit": True}, format="json"
    )
    assert ok.status_code == 200 and ok.json() == {"monthly_amount": "50.00", "hold_at_limit": True}

    assert client(alice).put(f"/api/v1/groups/{lab.pk}/plan", {"plan": "payg"}, format="json").status_code == 403
    assert client(admin_user).put(f"/api/v1/groups/{lab.pk}/plan", {"plan": "free"}, format="json").status_code == 400
    assert (
        client(admin_user).put(f"/api/v1/groups/{lab.pk}/plan", {"plan": "payg"}, format="json").json()["plan"]
        == "payg"
    )

    pool = {"amount": 500, "reason": "grant", "idempotency_key": "abcdefgh1"}
    assert client(alice).post(f"/api/v1/groups/{lab.pk}/credits", pool, format="json").status_code == 403
    first = client(admin_user).post(f"/api/v1/groups/{lab.pk}/credits", pool, format="json").json()
    again = client(admin_user).post(f"/api/v1/groups/{lab.pk}/credits", pool, format="json").json()
    assert (first, again) == ({"credit_pool": 500, "added": True}, {"credit_pool": 500, "added": False})


def test_the_money_page_shows_each_role_its_part(group_invoice, lab, alice, bob, admin_user, django_user_model):
    page = Client()
    page.force_login(alice)
    body = page.get(f"/billing/groups/{lab.pk}/").content.decode()
    assert "Pay as you go" in body and "data-budget-form" in body and "data-group-invoices" in body
    assert "data-plan-form" not in body  # the PI does not pick what the group pays
    page.force_login(bob)
    body = page.get(f"/billing/groups/{lab.pk}/").content.decode()
    assert "Your share" in body and "data-budget-form" not in body and "data-pool" not in body
    page.force_login(admin_user)
    assert "data-plan-form" in page.get(f"/billing/groups/{lab.pk}/").content.decode()
    outsider = django_user_model.objects.create_user("dave", "dave@x.org", "pw-dave")
    page.force_login(outsider)
    assert page.get(f"/billing/groups/{lab.pk}/").status_code == 404
    assert page.post(f"/billing/groups/{lab.pk}/budget", {"monthly_amount": "5"}).status_code == 404
    assert not GroupBudget.objects.exists()


def test_a_running_group_jobs_estimate_is_priced_by_the_groups_plan(lab, bob, admin_user, payg):
    from billing.costs import job_costs
    from jobs.models import Job, JobState

    subscribe(bob, "pro")  # bob's own plan includes A100 hours: his own jobs would show $0
    pays_since(lab, "payg", admin_user, timezone.now() - timedelta(days=1))
    started = timezone.now() - timedelta(seconds=1000)
    common = {"owner": bob, "cluster_user": "bob", "spec": {}, "state": JobState.RUNNING, "start_time": started}
    group_job = Job.objects.create(
        name="g", gpu_type="a100", quota_gpus=1, tres_per_node="gres/gpu:a100:1", group=lab, **common
    )
    own_job = Job.objects.create(name="o", gpu_type="a100", quota_gpus=1, tres_per_node="gres/gpu:a100:1", **common)
    costs = job_costs([group_job, own_job], now=started + timedelta(seconds=1000))
    assert costs[group_job.pk].cost_so_far == 1000 * A100_LIST  # the group's pay-as-you-go plan
    assert costs[own_job.pk].cost_so_far == 0  # bob's Pro hours cover his own


def test_the_members_usage_page_counts_only_what_they_pay_for(lab, bob, admin_user, payg):
    from billing.usage.usage_page import by_day, invoice_month

    subscribe(bob, "payg")
    pays_since(lab, "payg", admin_user, JUNE - timedelta(days=10))
    group_run = charged(usage(bob, group=lab, seconds=3600))
    own_run = charged(usage(bob, seconds=600))
    june = datetime(2026, 6, 1).date()
    charges, _included = invoice_month(bob.pk, june)
    assert charges == own_run.amount != group_run.amount
    assert sum(row.runs for row in by_day(bob.pk, june)) == 1


def test_the_money_page_counts_the_plan_fee_its_invoice_bills(lab, alice, bob, admin_user):
    """It said "Charged to the group: $0.00" above the group's own invoice of a plan fee."""
    from billing.invoices.drafts import month_of
    from billing.pricing import to_cents
    from foundation.money import usd

    pays_since(lab, "pro", admin_user, timezone.now() - timedelta(days=40))  # the whole month held
    seen = group_money.money_seen_by(alice, lab, month_of(timezone.now()))
    assert seen.fee == Decimal("299.00") and seen.invoiced_so_far == to_cents(seen.spent) + Decimal("299.00")
    page = Client()
    page.force_login(alice)
    body = page.get(f"/billing/groups/{lab.pk}/").content.decode()
    assert f"{usd(seen.fee)} plan fee" in body
    assert "data-invoiced" in body and usd(seen.invoiced_so_far) in body
    page.force_login(bob)  # a member sees their share, not the group's bill
    assert "data-invoiced" not in page.get(f"/billing/groups/{lab.pk}/").content.decode()
