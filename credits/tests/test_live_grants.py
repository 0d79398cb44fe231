"""The three grants end to end on the real dev cluster: sign-up through a referral link,
verification from the sent mail, then the tutorial job submitted over the API, run by Slurm
and mirrored to COMPLETED by the portal's own worker and beat (the grants are written in the
worker, by the mirror's job_changed signal)."""

import pytest
import requests
from django.test import Client

from accounts.models import ApiToken
from credits.actions import ledger
from credits.models import Enrollment, LedgerEntry
from credits.tests.test_grants_flow import sign_up, verify_from_mail
from credits.tutorial import TUTORIAL_SPEC
from jobs.models import Job, JobState
from testing.servers import portal_stack
from testing.slurm import wait_for

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]


def _grant_kinds(user) -> set[str]:
    return set(LedgerEntry.objects.filter(account__user=user, kind="grant").values_list("grant_kind", flat=True))


def test_the_tutorial_job_on_the_cluster_grants_the_tutorial_and_both_referral_grants(alice, provision):
    browser = Client(REMOTE_ADDR="203.0.113.20")
    carol = sign_up(
        browser, "carol", "carol@example.org", landing=f"/r/welcome?ref={ledger.account_for(alice.pk).referral_code}"
    )
    verify_from_mail(browser, "carol@example.org")
    assert _grant_kinds(carol) == {"signup"}
    provision(carol)
    _token, key = ApiToken.issue(carol, "tutorial")
    body = {name: value for name, value in TUTORIAL_SPEC.items() if value not in ("", {})}
    with portal_stack(worker=True, beat=True) as base_url:
        response = requests.post(
            f"{base_url}/api/v1/jobs/", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=10
        )
        assert response.status_code == 201, response.text
        job_id = response.json()["id"]
        wait_for(
            lambda: Job.objects.filter(pk=job_id, state=JobState.COMPLETED).exists(),
            timeout=180,
            what="the tutorial job",
        )
        wait_for(lambda: "tutorial" in _grant_kinds(carol), timeout=60, what="the tutorial grant")
    job = Job.objects.get(pk=job_id)
    assert job.exit_code == 0 and job.slurm_job_id
    assert _grant_kinds(carol) == {"signup", "tutorial", "referral_invitee"}
    assert _grant_kinds(alice) == {"referral_inviter"}
    assert Enrollment.objects.get(user=carol).activated_at is not None
    assert ledger.balance(carol.pk) == ledger.sum_of_entries(carol.pk) == 5000 + 10000 + 5000
