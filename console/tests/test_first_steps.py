"""A new user's dashboard says what verifying their address brings (their campaign's amount,
not a number written into the page) and where the tutorial is, with its link; the steps go
once both are done, and promise nothing that would not come."""

import re

import pytest
from allauth.account.models import EmailAddress
from django.test import Client

from credits.actions import ledger
from credits.actions.grants import default_campaign, enroll
from credits.models import Campaign, Enrollment
from credits.tutorial import SUMMARY, TEMPLATE_NAME
from jobs.models import JobTemplate

pytestmark = pytest.mark.django_db


def _dashboard(user) -> str:
    browser = Client()
    browser.force_login(user)
    page = browser.get("/")
    assert page.status_code == 200
    return page.content.decode()


def test_a_new_user_is_told_the_verification_credits_and_where_the_tutorial_is(alice):
    Campaign.objects.filter(pk=default_campaign().pk).update(signup_gpu_seconds=7200, tutorial_gpu_seconds=12345)
    page = _dashboard(alice)
    assert "data-first-steps" in page
    assert re.search(r"<strong data-signup-credits>7,200 credits</strong> \(about 2\.0 hours", page)
    assert "<strong data-tutorial-credits>12,345 more credits</strong> (once your address is verified)" in page
    template = JobTemplate.objects.get(owner=alice, name=TEMPLATE_NAME)
    link = f'<a href="/jobs/new/?template={template.pk}" data-tutorial-link>{TEMPLATE_NAME}</a>'
    assert link in page and SUMMARY in page
    assert 'href="/accounts/email/"' in page  # where to send the link again


def test_the_amounts_are_the_users_own_campaigns(alice):
    spring = Campaign.objects.create(
        code="spring", name="Spring", start=default_campaign().start, signup_gpu_seconds=9000, tutorial_gpu_seconds=0
    )
    enroll(alice, campaign=spring)
    page = _dashboard(alice)
    assert "9,000 credits" in page and "data-tutorial-credits" not in page  # this campaign pays no tutorial
    assert "data-tutorial-link" in page


def test_no_credits_are_promised_where_none_would_come(alice):
    enroll(alice)
    Enrollment.objects.filter(user=alice).update(grants_refused="disposable e-mail domain")
    page = _dashboard(alice)
    assert "data-first-steps" in page and "data-signup-credits" not in page and "data-tutorial-credits" not in page


def test_the_steps_follow_the_user_and_go_once_both_are_done(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    ledger.grant(alice.pk, 5000, key=f"signup:{alice.pk}", grant_kind="signup", campaign_id=default_campaign().pk)
    page = _dashboard(alice)
    assert "Your e-mail address is verified: its credits are in your balance." in page
    assert "data-tutorial-link" in page
    ledger.grant(alice.pk, 10000, key=f"tutorial:{alice.pk}", grant_kind="tutorial", campaign_id=default_campaign().pk)
    assert "data-first-steps" not in _dashboard(alice)


def test_marketing_gets_no_first_steps(marketer):
    assert "data-first-steps" not in _dashboard(marketer)
