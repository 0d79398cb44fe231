"""Each fraud rule, on its own."""

from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.contrib.auth import get_user_model
from django.utils import timezone

from credits import fraud
from credits.actions import grants, ledger
from credits.models import Campaign, Enrollment, GrantKind, LedgerEntry, Sighting
from credits.tutorial import TUTORIAL_SPEC
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db


def _user(name, email):
    return get_user_model().objects.create_user(username=name, email=email, password="x")


def _activate(user):
    grants.email_verified(user.pk)
    job = Job.objects.create(owner=user, state=JobState.COMPLETED, exit_code=0)
    grants.job_finished(job)


def _referral_grants(user):
    return set(
        LedgerEntry.objects.filter(account__user=user, grant_kind__startswith="referral").values_list(
            "grant_kind", flat=True
        )
    )


@pytest.mark.parametrize(
    ("email", "normalised"),
    [
        ("Jo.Smith+gpu@GMail.com", "josmith@gmail.com"),
        ("jo.smith@googlemail.com", "josmith@gmail.com"),
        ("jo.smith+x@example.org", "jo.smith@example.org"),  # dots matter outside Gmail
    ],
)
def test_normalised_email(email, normalised):
    assert fraud.normalise_email(email) == normalised


def test_disposable_domains_come_from_the_maintained_list():
    assert fraud.is_disposable("x@mailinator.com") and fraud.is_disposable("x@sub.mailinator.com")
    assert not fraud.is_disposable("x@example.org")


def test_no_self_referral_by_the_same_account(alice):
    enrollment = grants.enroll(alice, referrer=alice)
    assert "same account" in enrollment.referral_refused


def test_no_self_referral_by_a_verified_address_of_the_referrer(alice):
    EmailAddress.objects.create(user=alice, email="alice.second@example.org", verified=True)
    invitee = _user("alice2", "Alice.Second@example.org")
    assert "verified" in grants.enroll(invitee, referrer=alice).referral_refused
    _activate(invitee)
    assert _referral_grants(invitee) == set() and _referral_grants(alice) == set()


def test_no_self_referral_by_the_same_mailbox_written_differently():
    referrer = _user("gina", "gina.lee@gmail.com")
    invitee = _user("gina2", "ginalee+gpu@googlemail.com")
    assert "mailbox" in grants.enroll(invitee, referrer=referrer).referral_refused
    _activate(invitee)
    assert _referral_grants(referrer) == set()


def test_a_disposable_address_earns_no_grant_at_all(alice):
    invitee = _user("temp", "temp@mailinator.com")
    assert grants.enroll(invitee, referrer=alice).grants_refused == "disposable e-mail domain"
    _activate(invitee)
    assert not LedgerEntry.objects.filter(account__user=invitee).exists()
    assert _referral_grants(alice) == set()


def test_same_address_within_30_days_is_held_and_older_is_not(alice):
    Sighting.objects.create(user=alice, ip="192.0.2.5", browser_id="b-alice")
    held = grants.enroll(_user("h1", "h1@example.org"), referrer=alice, ip="192.0.2.5", browser_id="b-other")
    assert "same address" in held.review_reason
    Sighting.objects.filter(user=alice).update(last_seen=timezone.now() - timedelta(days=31))
    fresh = grants.enroll(_user("h2", "h2@example.org"), referrer=alice, ip="192.0.2.5", browser_id="b-other")
    assert fresh.review_reason == ""


def test_same_browser_cookie_is_held(alice):
    Sighting.objects.create(user=alice, ip="192.0.2.5", browser_id="b-alice")
    held = grants.enroll(_user("h3", "h3@example.org"), referrer=alice, ip="198.51.100.9", browser_id="b-alice")
    assert "same browser" in held.review_reason


def test_a_referrers_grants_stop_at_the_cap(alice):
    campaign = Campaign.objects.create(name="Capped", code="capped", start="2020-01-01T00:00Z", per_referrer_cap=2)
    invitees = [_user(f"inv{i}", f"inv{i}@example.org") for i in range(3)]
    for invitee in invitees:
        grants.enroll(invitee, campaign=campaign, referrer=alice)
        _activate(invitee)
    inviter = LedgerEntry.objects.filter(account__user=alice, grant_kind=GrantKind.REFERRAL_INVITER)
    assert inviter.count() == 2
    # The invitees still get theirs.
    assert all(_referral_grants(invitee) == {"referral_invitee"} for invitee in invitees)
    assert ledger.balance(alice.pk) == 2 * campaign.referral_gpu_seconds


def test_a_second_account_on_the_same_mailbox_gets_no_sign_up_grant():
    first = _user("m1", "max.power@gmail.com")
    grants.enroll(first)
    grants.email_verified(first.pk)
    second = _user("m2", "maxpower+2@gmail.com")
    assert "mailbox" in grants.enroll(second).grants_refused
    grants.email_verified(second.pk)
    assert ledger.balance(second.pk) == 0 and ledger.balance(first.pk) == 5000
    assert Enrollment.objects.count() == 2


def test_an_unverified_account_gets_no_tutorial_grant_until_it_verifies():
    user = _user("unverified", "unverified@example.org")
    grants.enroll(user)
    job = Job.objects.create(owner=user, state=JobState.COMPLETED, exit_code=0, spec=TUTORIAL_SPEC)
    grants.job_finished(job)
    assert ledger.balance(user.pk) == 0
    grants.email_verified(user.pk)
    assert ledger.balance(user.pk) == 5000 + 10000  # sign-up and tutorial, once verified


def test_a_second_account_that_later_confirms_a_spelling_of_the_first_mailbox_earns_nothing():
    first = _user("own1", "jo.smith@gmail.com")
    grants.enroll(first)
    grants.email_verified(first.pk)
    second = _user("own2", "someone-else@example.org")  # signs up with another address, never confirmed
    assert grants.enroll(second).grants_refused == ""
    EmailAddress.objects.create(user=second, email="josmith+b@gmail.com", verified=True)
    grants.email_verified(second.pk, "josmith+b@gmail.com")  # what allauth's email_confirmed sends
    assert ledger.balance(second.pk) == 0 and ledger.balance(first.pk) == 5000
    assert "mailbox" in Enrollment.objects.get(user=second).grants_refused


def test_an_address_typed_at_sign_up_but_never_confirmed_takes_nothing_from_its_owner():
    squatter = _user("squat", "owner@example.org")
    grants.enroll(squatter)  # never verifies
    owner = _user("owner", "owner+portal@example.org")
    assert grants.enroll(owner).grants_refused == ""
    grants.email_verified(owner.pk)
    assert ledger.balance(owner.pk) == 5000


def test_a_reviewer_cannot_decide_a_grant_that_pays_them_and_the_note_stays_internal(marketer):
    from credits.models import HeldGrant

    held = HeldGrant.objects.create(
        user=marketer, campaign=grants.default_campaign(), grant_kind=GrantKind.REFERRAL_INVITER, amount=5000,
        idempotency_key="referral:inviter:999999", reference="invitee:999999", reason="same browser",
    )  # fmt: skip
    with pytest.raises(grants.ReviewError, match="pays you"):
        grants.decide(held.pk, approve=True, actor=marketer, note="mine")
    held.refresh_from_db()
    assert held.state == "pending" and ledger.balance(marketer.pk) == 0
    colleague = _user("colleague", "colleague@example.org")
    grants.decide(held.pk, approve=True, actor=colleague, note="internal: checked the sign-in logs")
    entry = LedgerEntry.objects.get(idempotency_key="referral:inviter:999999")
    assert entry.reason == "approved on review"
    from django.test import Client

    browser = Client()
    browser.force_login(marketer)
    page = browser.get("/credits/").content.decode()
    assert "approved on review" in page and "sign-in logs" not in page
