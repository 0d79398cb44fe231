"""Pay-afterwards accounts run up a bill only within an approved limit; an overdue invoice holds
new jobs on any plan (billing/actions/credit_limits.py). Attacks first: each was possible before."""

from datetime import timedelta
from decimal import Decimal

import pytest
from django.core import mail
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from billing.actions.credit_limits import approve_credit_limit, credit_limit_check, owed
from billing.models import CreditLimit, Invoice, Payment, UsageRecord
from conftest import subscribe
from jobs.submission.checks import SubmissionRefused, run_submission_checks
from plans.catalog import plan_for

pytestmark = pytest.mark.django_db(transaction=True)


def _charge(user, amount: str, invoice=None):
    invoice = (
        invoice
        or Invoice.objects.get_or_create(
            user=user, period=timezone.now().date().replace(day=1), status=Invoice.Status.DRAFT
        )[0]
    )
    now = timezone.now()
    return UsageRecord.objects.create(
        cluster="test", slurm_job_id=UsageRecord.objects.count() + 7000, run_start=now - timedelta(hours=1),
        run_end=now, gpu_type="h100", user=user, state="COMPLETED", seconds=3600, gpu_count=1, gpu_seconds=3600,
        invoice=invoice, charged_at=now, amount=Decimal(amount),
    )  # fmt: skip


def test_an_unvetted_account_on_enterprise_cannot_submit(bob):
    subscribe(bob, "enterprise")
    CreditLimit.objects.filter(user=bob).delete()  # as a new sign-up switching to Enterprise has none
    with pytest.raises(SubmissionRefused, match="needs a credit limit approved by an admin"):
        run_submission_checks(bob, plan_for(bob))


def test_at_the_limit_new_jobs_are_held_with_one_email_a_month(bob):
    subscribe(bob, "enterprise")
    approve_credit_limit(bob, Decimal("10.00"), actor=None, reason="trial")
    _charge(bob, "9.99")
    credit_limit_check(bob, plan_for(bob))  # below the limit: allowed
    _charge(bob, "0.01")
    assert owed(bob.pk) == Decimal("10.00")
    for _ in range(2):
        with pytest.raises(SubmissionRefused, match=r"owes \$10.00, which reaches its credit limit of \$10.00"):
            credit_limit_check(bob, plan_for(bob))
    assert [message.to for message in mail.outbox] == [["bob@x.org"]]  # once, not per refusal
    approve_credit_limit(bob, Decimal("50.00"), actor=None, reason="raised")
    credit_limit_check(bob, plan_for(bob))  # the next submission goes through at once


def test_an_overdue_invoice_holds_new_jobs_on_any_plan_until_paid(alice):
    issued = Invoice.objects.create(
        user=alice, period=timezone.now().date().replace(day=1) - timedelta(days=60), status=Invoice.Status.ISSUED,
        number="GP-2026-000777", total=Decimal("299.00"), issued_at=timezone.now() - timedelta(days=31),
    )  # fmt: skip
    with pytest.raises(SubmissionRefused, match="GP-2026-000777.*unpaid after 30 days"):
        credit_limit_check(alice, plan_for(alice))
    Payment.objects.create(
        invoice=issued, amount=Decimal("299.00"), idempotency_key="paid-777", received_at=timezone.now()
    )
    credit_limit_check(alice, plan_for(alice))


def test_admins_approve_limits_in_the_admin_audited_but_never_their_own(admin_user, bob):
    client = Client()
    client.force_login(admin_user)
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client.force_login(admin_user)
    form = {"user": bob.pk, "amount": "250.00", "reason": "signed contract"}
    assert client.post("/django-admin/billing/creditlimit/add/", form).status_code == 302
    limit = CreditLimit.objects.get(user=bob)
    assert limit.amount == Decimal("250.00") and limit.approved_by == admin_user and limit.approved_at
    assert AuditLog.objects.filter(action="billing.credit_limit", actor=admin_user, target=f"user {bob.pk}").exists()
    CreditLimit.objects.filter(user=admin_user).delete()
    own = client.post("/django-admin/billing/creditlimit/add/", {**form, "user": admin_user.pk})
    assert own.status_code == 403 and not CreditLimit.objects.filter(user=admin_user).exists()


@pytest.mark.slurm
def test_at_the_limit_waiting_work_is_held_in_slurm_and_released_under_it(bob, admin_user, provision):
    """Accepted work kept starting after the limit was passed (owed 8x the limit)."""
    from billing.actions.credit_limits import hold_work_at_limits
    from cluster.clusters.services import slurm_cli

    profile = provision(bob)
    subscribe(bob, "enterprise")
    limit = approve_credit_limit(bob, Decimal("10.00"), actor=None, reason="trial")

    def max_jobs() -> str:
        shown = slurm_cli().run(
            "sacctmgr", "-n", "-P", "show", "assoc", f"users={profile.cluster_username}", "format=Account,MaxJobs"
        )  # fmt: skip
        return dict(line.split("|") for line in shown.stdout.splitlines() if line)["portal"]

    assert hold_work_at_limits() == {"held": 0, "released": 0} and max_jobs() == ""
    _charge(bob, "10.00")
    assert hold_work_at_limits() == {"held": 1, "released": 0}
    assert max_jobs() == "0" and CreditLimit.objects.get(pk=limit.pk).work_held_at is not None
    assert sorted(message.to[0] for message in mail.outbox) == sorted([bob.email, admin_user.email])
    assert hold_work_at_limits() == {"held": 0, "released": 0} and len(mail.outbox) == 2  # once
    approve_credit_limit(bob, Decimal("50.00"), actor=None, reason="raised")
    assert hold_work_at_limits() == {"held": 0, "released": 1} and max_jobs() == ""
    # A plan sync (the association's plan limits written again) leaves a hold where it is.
    _charge(bob, "45.00")
    hold_work_at_limits()
    from plans import enforcement

    enforcement.sync()
    assert max_jobs() == "0"
