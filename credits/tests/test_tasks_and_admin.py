"""The beat tasks (expiry, the sweep that repairs a missed signal) and the Django admin's
weights and adjustments."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from audit.models import AuditLog
from credits.actions import grants, ledger
from credits.models import BurnWeight, CreditLot, Enrollment, LedgerEntry
from credits.tasks import expire_credits, sweep_grants
from credits.tutorial import TUTORIAL_SPEC
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db


def test_the_sweep_grants_what_a_missed_signal_did_not(alice):
    grants.enroll(alice)
    Enrollment.objects.filter(user=alice).update(verified_at=timezone.now())  # verified, signal missed too
    # A tutorial job the mirror finished while no receiver ran (no signal sent here).
    Job.objects.create(owner=alice, state=JobState.COMPLETED, exit_code=0, end_time=timezone.now(), spec=TUTORIAL_SPEC)
    assert not LedgerEntry.objects.filter(account__user=alice).exists()
    sweep_grants()
    sweep_grants()  # a second sweep grants nothing more
    kinds = sorted(LedgerEntry.objects.filter(account__user=alice).values_list("grant_kind", flat=True))
    assert kinds == ["signup", "tutorial"]
    assert Enrollment.objects.get(user=alice).activated_at is not None


def test_expiry_runs_over_every_due_account_once(alice, bob):
    for user in (alice, bob):
        entry, _ = ledger.grant(
            user.pk, 100, key=f"g{user.pk}", grant_kind="signup", campaign_id=grants.default_campaign().pk
        )
        CreditLot.objects.filter(entry=entry).update(expires_at=timezone.now() - timedelta(minutes=1))
    assert expire_credits() == 2 and expire_credits() == 0
    assert ledger.balance(alice.pk) == ledger.balance(bob.pk) == 0


def test_weights_are_added_never_edited_in_the_admin(admin_user):
    client = Client()
    client.force_login(admin_user)
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    weight = BurnWeight.objects.get(gpu_type="a100")
    assert client.get(f"/django-admin/credits/burnweight/{weight.pk}/change/").context["has_change_permission"] is False
    response = client.post(
        "/django-admin/credits/burnweight/add/",
        {
            "gpu_type": "a100",
            "credits_per_gpu_second": "3.5",
            "effective_from_0": "2026-01-01",
            "effective_from_1": "00:00:00",
            "note": "new prices",
        },
    )
    assert response.status_code == 302
    assert AuditLog.objects.filter(action="credits.weight.add", actor=admin_user).exists()


def test_an_adjustment_in_the_admin_needs_a_reason_and_is_audited(admin_user, alice):
    admin_user.is_staff = admin_user.is_superuser = True
    admin_user.save()
    client = Client()
    client.force_login(admin_user)
    account = ledger.account_for(alice.pk)
    url = f"/django-admin/credits/creditaccount/{account.pk}/change/"
    key = client.get(url).context["adminform"].form.initial["submission_key"]
    assert len(key) == 32
    form = {"adjust_by": "500", "reason": "", "submission_key": key}
    assert client.post(url, form).status_code == 200  # refused: no reason
    assert ledger.balance(alice.pk) == 0
    form["reason"] = "outage on node 3"
    assert client.post(url, form).status_code == 302
    assert ledger.balance(alice.pk) == 500 == ledger.sum_of_entries(alice.pk)
    # The same form sent again (a double click): one adjustment.
    assert client.post(url, form).status_code == 302
    assert ledger.balance(alice.pk) == 500 and AuditLog.objects.filter(action="credits.adjust").count() == 1
    # A form without its key (or with a forged one) is refused and changes nothing.
    for bad in ("", "not-hex"):
        assert client.post(url, {**form, "submission_key": bad}).status_code == 200
    assert ledger.balance(alice.pk) == 500
    assert AuditLog.objects.filter(action="credits.adjust", actor=admin_user, reason="outage on node 3").exists()
