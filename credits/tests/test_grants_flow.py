"""The grants through the real flows: the landing link, allauth's sign-up form, the
verification link from the sent mail, and a job the mirror records COMPLETED (the signal
jobs.live.events.publish_job_update sends after the mirror's commit)."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

from audit.models import AuditLog
from credits.actions import ledger
from credits.models import Campaign, Enrollment, HeldGrant, LedgerEntry
from credits.tutorial import TEMPLATE_NAME, TUTORIAL_SPEC
from jobs.live.events import publish_job_update
from jobs.models import Job, JobState, JobTemplate

pytestmark = pytest.mark.django_db(transaction=True)


def sign_up(client: Client, username: str, email: str, landing: str | None = None) -> "get_user_model()":
    mail.outbox.clear()
    if landing:
        assert client.get(landing).status_code == 200
    response = client.post(
        "/accounts/signup/",
        {
            "username": username,
            "email": email,
            "password1": "a-long-pass-phrase-1",
            "password2": "a-long-pass-phrase-1",
        },
    )
    assert response.status_code == 302, response.content[:2000]
    return get_user_model().objects.get(username=username)


def verify_from_mail(client: Client, email: str) -> None:
    message = next(m for m in mail.outbox if email in m.to)
    link = re.search(r"https?://[^/\s]+(/accounts/confirm-email/[^\s]+)", message.body).group(1)
    assert client.get(link).status_code == 200
    assert client.post(link).status_code == 302


def finish_job(user, *, spec=None, state=JobState.COMPLETED, exit_code=0) -> Job:
    job = Job.objects.create(owner=user, state=JobState.RUNNING, spec=spec or {"command": "echo hi", "image": "x"})
    Job.objects.filter(pk=job.pk).update(state=state, exit_code=exit_code)
    publish_job_update(job.pk)
    return job


def grants_of(user) -> dict[str, int]:
    return dict(LedgerEntry.objects.filter(account__user=user, kind="grant").values_list("grant_kind", "amount"))


def test_sign_up_through_a_referral_link_then_verification_then_the_tutorial(alice):
    campaign = Campaign.objects.create(
        name="Spring", code="spring", start="2020-01-01T00:00Z", referral_gpu_seconds=7000
    )
    referral_code = ledger.account_for(alice.pk).referral_code
    client = Client(REMOTE_ADDR="203.0.113.7")
    carol = sign_up(client, "carol", "carol@example.org", landing=f"/r/spring?ref={referral_code}")

    enrollment = Enrollment.objects.get(user=carol)
    assert enrollment.campaign == campaign and enrollment.referrer == alice and enrollment.review_reason == ""
    assert grants_of(carol) == {}  # nothing before the address is verified

    verify_from_mail(client, "carol@example.org")
    assert grants_of(carol) == {"signup": 5000}
    assert ledger.balance(carol.pk) == 5000

    # Every user sees the tutorial template; a job of another command completes first.
    assert JobTemplate.objects.get(owner=carol, name=TEMPLATE_NAME).spec == TUTORIAL_SPEC
    finish_job(carol, state=JobState.FAILED, exit_code=1)
    assert "referral_invitee" not in grants_of(carol)
    finish_job(carol)
    # The first completed job: the referral, to both sides; not the tutorial.
    assert grants_of(carol) == {"signup": 5000, "referral_invitee": 7000}
    assert grants_of(alice) == {"referral_inviter": 7000}
    finish_job(carol, spec=TUTORIAL_SPEC)
    finish_job(carol, spec=TUTORIAL_SPEC)  # a second tutorial earns nothing more
    assert grants_of(carol) == {"signup": 5000, "referral_invitee": 7000, "tutorial": 10000}
    assert ledger.balance(carol.pk) == ledger.sum_of_entries(carol.pk) == 22000
    campaign.refresh_from_db()
    assert campaign.granted_gpu_seconds == 5000 + 7000 + 7000 + 10000


def test_a_failed_tutorial_grants_nothing(alice):
    finish_job(alice, spec=TUTORIAL_SPEC, state=JobState.COMPLETED, exit_code=3)
    finish_job(alice, spec=TUTORIAL_SPEC, state=JobState.FAILED, exit_code=0)
    assert "tutorial" not in grants_of(alice)


def test_a_sign_up_without_a_link_gets_the_standing_campaigns_grant():
    client = Client()
    dave = sign_up(client, "dave", "dave@example.org")
    verify_from_mail(client, "dave@example.org")
    assert grants_of(dave) == {"signup": 5000}
    assert Enrollment.objects.get(user=dave).campaign.code == "welcome"


def test_an_ended_campaign_grants_nothing_and_says_so(alice):
    Campaign.objects.create(name="Old", code="old", start="2020-01-01T00:00Z", end="2020-02-01T00:00Z")
    client = Client()
    page = client.get("/r/old")
    assert b"ended on 2020-02-01" in page.content
    erin = sign_up(client, "erin", "erin@example.org", landing="/r/old")
    verify_from_mail(client, "erin@example.org")
    assert grants_of(erin) == {}


def test_a_spent_budget_grants_nothing_and_says_so():
    Campaign.objects.create(name="Tiny", code="tiny", start="2020-01-01T00:00Z", budget_gpu_seconds=6000)
    first, second = Client(), Client()
    one = sign_up(first, "one", "one@example.org", landing="/r/tiny")
    verify_from_mail(first, "one@example.org")
    two = sign_up(second, "two", "two@example.org", landing="/r/tiny")
    verify_from_mail(second, "two@example.org")
    assert grants_of(one) == {"signup": 5000} and grants_of(two) == {}  # 1,000 left cannot cover 5,000
    Campaign.objects.filter(code="tiny").update(granted_gpu_seconds=6000)
    assert b"budget is spent" in Client().get("/r/tiny").content


def test_an_invitee_in_the_referrers_browser_is_held_and_marketing_decides(alice, marketer):
    referral_code = ledger.account_for(alice.pk).referral_code
    browser = Client(REMOTE_ADDR="198.51.100.1")
    browser.post("/accounts/login/", {"login": "alice", "password": "pw-alice"})
    browser.post("/accounts/logout/")
    frank = sign_up(browser, "frank", "frank@example.org", landing=f"/r/welcome?ref={referral_code}")
    assert "same browser" in Enrollment.objects.get(user=frank).review_reason
    verify_from_mail(browser, "frank@example.org")
    finish_job(frank)
    assert grants_of(frank) == {"signup": 5000}  # the sign-up grant is not held; the referral is
    held = HeldGrant.objects.filter(state="pending")
    assert sorted(held.values_list("grant_kind", flat=True)) == ["referral_invitee", "referral_inviter"]

    console = Client()
    console.force_login(marketer)
    page = console.get("/marketing/review/")
    assert b"frank" in page.content
    invitee = held.get(grant_kind="referral_invitee")
    inviter = held.get(grant_kind="referral_inviter")
    console.post(f"/marketing/review/{invitee.pk}/decide", {"decision": "approve", "note": "colleagues"})
    console.post(f"/marketing/review/{inviter.pk}/decide", {"decision": "reject", "note": "same person"})
    assert grants_of(frank) == {"signup": 5000, "referral_invitee": 5000}
    assert "referral_inviter" not in grants_of(alice)
    assert AuditLog.objects.filter(action__startswith="credits.held_grant.", actor=marketer).count() == 2
    # A decided grant is not decided again.
    console.post(f"/marketing/review/{inviter.pk}/decide", {"decision": "approve"})
    assert "referral_inviter" not in grants_of(alice)
