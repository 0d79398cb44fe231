"""Money per group on the real dev cluster, in Debian's Chromium at phone width: a group that
holds a plan, a member's job charged to it (Slurm runs it with the group's account), metered
from slurmdbd onto the group's invoice as a line naming the member and the GPU type, and the
PI reading that on the group's money page; the member sees only their share."""

import re
from datetime import timedelta

import pytest
from django.utils import timezone

from billing.actions import invoicing
from billing.models import InvoiceLine, UsageRecord
from billing.usage.metering import run_metering
from cluster.clusters.services import rest_client, slurm_cli
from groups import actions
from groups.tests.test_groups_slurm import (
    _sync,
    _verified,
    group_accounts,  # noqa: F401 (a fixture)
)
from jobs import actions as job_actions
from jobs.models import Job
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tasks import run_sync, submit_to_slurm
from plans.catalog import plan_for
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack
from testing.slurm import wait_for, wait_for_state

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
]
PHONE = {"width": 390, "height": 844}


def test_a_members_group_job_is_on_the_groups_invoice_and_the_pi_reads_it_on_a_phone(
    alice,
    bob,
    admin_user,
    provision,
    group_accounts,  # noqa: F811 (the fixture imported above)
    settings,
):
    provision(_verified(alice))
    member = provision(_verified(bob))
    slug = f"pay{timezone.now():%H%M%S%f}"[:20]
    settings.GROUP_DEFAULT_ORGANIZATION = f"uni{slug[-6:]}"
    group = actions.create_group(alice, name="Paying lab", slug=slug)
    group_accounts.append(group)
    _invitation, token = actions.invite(group.pk, alice, email=bob.email)
    actions.accept_invitation(token, bob)
    today = timezone.now().date()
    allocation = actions.request_allocation(
        group.pk, alice, gpu_type="a100", gpu_hours=1, starts_on=today, ends_on=today + timedelta(days=30),
        justification="Paying for it.",
    )  # fmt: skip
    actions.decide_allocation(allocation.pk, admin_user, approve=True)
    actions.set_group_plan(group.pk, admin_user, "enterprise")  # pays per second: the run costs money
    _sync(group)
    run_sync()  # a fresh database catches up on the cluster's history first

    data = {"name": "paid", "image": "nvcr.io/nvidia/pytorch:24.05-py3", "gpu_type": "a100", "gpu_count": 1}
    spec = parse_job_spec(
        {**data, "command": "sleep 3", "time_limit_minutes": 5}, plan=plan_for(bob), policy=SpecPolicy.from_settings()
    )
    job = job_actions.submit(bob, spec, group_id=group.pk)
    assert submit_to_slurm.run(job.pk) in {"submitted", "not-claimable"}
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    shown = slurm_cli().run("scontrol", "show", "job", str(job.slurm_job_id)).stdout
    assert f"Account={group.slurm_account}" in shown
    wait_for_state(rest_client(member.cluster_username), job.slurm_job_id, {"COMPLETED"}, timeout=120)

    def metered():
        run_metering()
        return UsageRecord.objects.filter(job=job, invoice__isnull=False).first()

    record = wait_for(metered, timeout=120, interval=1, what="slurmdbd to settle the group job's run")
    assert record.group_id == group.pk and record.invoice.group_id == group.pk and record.invoice.user_id is None
    assert record.plan == "enterprise" and record.amount > 0
    invoicing.refresh_draft(record.invoice_id)
    [line] = InvoiceLine.objects.filter(invoice=record.invoice, kind=InvoiceLine.Kind.GPU)
    assert line.member_id == bob.pk and line.gpu_type == "a100" and line.description.startswith("bob: A100")
    assert Job.objects.get(pk=job.pk).group_id == group.pk

    with playwright_api.sync_playwright() as playwright, portal_stack() as base_url:
        browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
        try:
            errors = []
            pi = browser.new_context(viewport=PHONE).new_page()
            pi.on("pageerror", lambda error: errors.append(error))
            log_in(pi, base_url, "alice", "pw-alice")
            pi.goto(f"{base_url}/groups/{group.pk}/")
            pi.click("[data-money-link]")
            pi.wait_for_url(re.compile(rf".*/billing/groups/{group.pk}/$"))
            expect(pi.locator("[data-payer]")).to_contain_text("Enterprise")
            expect(pi.locator("[data-shares]")).to_contain_text("bob")
            expect(pi.locator("#group-money-chart")).to_have_attribute("data-drawn", "1")
            assert pi.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            pi.click(f"[data-group-invoices] a[href$='/billing/invoices/{record.invoice_id}/']")
            expect(pi.locator("table.invoice-lines")).to_contain_text("bob: A100")
            assert pi.evaluate("document.documentElement.scrollWidth <= window.innerWidth")

            them = browser.new_context(viewport=PHONE).new_page()
            log_in(them, base_url, "bob", "pw-bob")
            them.goto(f"{base_url}/billing/groups/{group.pk}/")
            expect(them.locator("h2").first).to_contain_text("Your share")
            expect(them.locator("[data-group-invoices]")).to_have_count(0)
            response = them.goto(f"{base_url}/billing/invoices/{record.invoice_id}/")
            assert response.status == 404
            assert errors == []
        finally:
            browser.close()
