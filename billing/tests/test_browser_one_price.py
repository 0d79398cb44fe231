"""In Chromium, one figure for one run: the job form's quote for the run's seconds, the finished
job's cost, the usage page and the invoice say the same, for a user paying by the second and for
a member whose group pays; at desktop and phone width. (The run is metered as slurmdbd and
telemetry would report it; the figures are the portal's.)"""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from billing.actions.charging import charge
from billing.actions.credit_limits import approve_credit_limit
from billing.models import UsageRecord
from conftest import _person, subscribe
from foundation.money import usd
from groups import actions as group_actions
from groups.models import GroupPlan, GroupRole, Membership
from jobs.models import Job, JobState
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SECONDS = 1800  # half an hour of one A100 with its 40 GB: what the form quotes as the most


MEMORY_GB = {"a100": 40, "rtx4090": 24}


def _finished_run(user, group=None, gpu_type="a100"):
    """A job of `user` that held one GPU and all its memory for SECONDS, metered and charged."""
    end = timezone.now() - timedelta(minutes=5)
    job = Job.objects.create(
        owner=user, name="priced", state=JobState.COMPLETED, gpu_type=gpu_type, tres_per_node=f"gres/gpu:{gpu_type}:1",
        start_time=end - timedelta(seconds=SECONDS), end_time=end, group=group, qos="premium",
        account=group.slurm_account if group else "",
    )  # fmt: skip
    record = UsageRecord.objects.create(
        cluster="test", slurm_job_id=987_000 + job.pk, run_start=job.start_time, run_end=end, gpu_type=gpu_type,
        user=user, job=job, group=group, state="COMPLETED", seconds=SECONDS, gpu_count=1, gpu_seconds=SECONDS,
        gpu_memory_gb_seconds=Decimal(MEMORY_GB[gpu_type] * SECONDS),
        gpu_memory_source=UsageRecord.MemorySource.TELEMETRY,
    )  # fmt: skip
    assert charge(record.pk)
    record.refresh_from_db()
    return job, record


def _quoted(page, base_url, expected: str, group_label=None, gpu_type="a100", form="/jobs/new/") -> str:
    page.goto(f"{base_url}{form}")
    page.select_option("#id_gpu_type", gpu_type)
    page.fill("#id_gpu_count", "1")
    page.fill("#id_time_limit_minutes", str(SECONDS // 60))
    if group_label is not None:
        page.select_option("#id_group", label=group_label)
    quote = page.locator("[data-job-quote]")
    expect(quote).to_contain_text(expected, timeout=15000)
    return quote.inner_text()


@pytest.mark.parametrize("width, height", [(1280, 900), (390, 844)], ids=["desktop", "phone"])
def test_the_quote_the_job_the_usage_page_and_the_invoice_say_one_figure(width, height):
    erin = _person("erin", plan="enterprise")
    approve_credit_limit(erin, Decimal("100"), actor=None, reason="test")
    job, record = _finished_run(erin)
    shown = usd(record.amount)
    assert record.amount == Decimal(SECONDS) * Decimal("0.0025") + Decimal(40 * SECONDS) * Decimal("0.00002")
    with chromium_page(playwright_api, width=width, height=height) as page, portal_stack() as base_url:
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "erin", "pw-erin")
        assert "enterprise plan's prices" in _quoted(page, base_url, f"You would pay at most {shown}.")
        # A notebook is a job: its form quotes the same.
        _quoted(page, base_url, f"You would pay at most {shown}.", form="/sessions/new/")
        page.goto(f"{base_url}/jobs/{job.pk}/")
        expect(page.locator("[data-field=cost]")).to_have_text(shown)
        page.goto(f"{base_url}/billing/usage/")
        expect(page.locator(".tile-figure").first).to_have_text(shown)
        page.goto(f"{base_url}/billing/invoices/{record.invoice_id}/")
        expect(page.locator("[data-total]")).to_have_text(shown)
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth + 1")
        assert errors == []


def test_a_group_member_on_free_is_quoted_what_the_group_pays(admin_user):
    pi, member = _person("pia"), _person("max", plan="free")
    from allauth.account.models import EmailAddress

    EmailAddress.objects.create(user=pi, email=pi.email, verified=True, primary=True)
    lab = group_actions.create_group(pi, name="Vision lab", slug="vision")
    Membership.objects.create(group=lab, user=member, role=GroupRole.MEMBER)
    lab.synced_at = timezone.now()
    lab.save()
    group_actions.set_group_plan(lab.pk, admin_user, "enterprise")
    GroupPlan.objects.filter(group=lab).update(started_at=timezone.now() - timedelta(days=1))  # before the run
    subscribe(member, "free")
    job, record = _finished_run(member, group=lab, gpu_type="rtx4090")  # the GPU Free offers
    assert record.plan == "enterprise" and record.invoice.group_id == lab.pk
    shown = usd(record.amount)
    with chromium_page(playwright_api) as page, portal_stack() as base_url:
        log_in(page, base_url, "max", "pw-max")
        label = f"{lab.name} ({lab.slurm_account})"
        text = _quoted(page, base_url, f"You would pay at most {shown}.", group_label=label, gpu_type="rtx4090")
        assert "charged to the group" in text
        # Charged to himself, Free bills nothing: the form says so, not the group's price.
        page.select_option("#id_group", label="Myself")
        expect(page.locator("[data-job-quote]")).to_contain_text("You would pay at most $0.00", timeout=15000)
        page.goto(f"{base_url}/jobs/{job.pk}/")
        expect(page.locator("[data-field=cost]")).to_have_text(shown)


@pytest.mark.parametrize("plan, gpu_type", [("pro", "a100"), ("free", "rtx4090")])
def test_a_plan_with_included_hours_is_quoted_and_billed_nothing_for_them(plan, gpu_type):
    """Pro's A100 hours and Free's capped 4090 hours: the form says $0.00 and so does the run,
    on its page and on the usage page (the hours it took are on the invoice, at $0)."""
    user = _person(f"{plan}-user", plan=plan)
    job, record = _finished_run(user, gpu_type=gpu_type)
    assert record.amount == 0 and record.included_gpu_seconds == SECONDS
    with chromium_page(playwright_api, width=390, height=844) as page, portal_stack() as base_url:
        log_in(page, base_url, f"{plan}-user", f"pw-{plan}-user")
        text = _quoted(page, base_url, "You would pay at most $0.00.", gpu_type=gpu_type)
        assert "by your plan's included hours" in text
        page.goto(f"{base_url}/jobs/{job.pk}/")
        expect(page.locator("[data-field=cost]")).to_have_text("$0.00")
        page.goto(f"{base_url}/billing/usage/")
        expect(page.locator(".tile-figure").first).to_have_text("$0.00")
        page.goto(f"{base_url}/billing/invoices/{record.invoice_id}/")
        expect(page.locator("main")).to_contain_text("0.50 h")  # the half hour the plan's hours took
