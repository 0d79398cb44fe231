"""Where sign-in and sign-up go next: a path of this site only, and a sign-up's `next` carried
through the e-mailed verification link, so an invitee comes back to the invitation once
verified, in the browser that signed up or in another."""

import re
from urllib.parse import unquote

import pytest
from allauth.account.models import EmailAddress
from django.core import mail
from django.test import Client

from accounts.adapter import local_path
from groups import actions

SIGN_UP = {"username": "newbie", "password1": "a-long-enough-pass-77", "password2": "a-long-enough-pass-77"}


@pytest.mark.parametrize(
    "url, local",
    [
        ("/groups/invitations/abc/", True),
        ("/jobs/new/?template=3", True),
        ("https://evil.example/", False),
        ("//evil.example/", False),
        ("/\\evil.example/", False),
        ("\\\\evil.example", False),
        ("http://127.0.0.1:8000/", False),  # even an allowed host: a path is all `next` takes
        ("javascript:alert(1)", False),
        ("/ok\r\nSet-Cookie: x=1", False),
        ("groups/", False),
        ("", False),
        (None, False),
    ],
)
def test_only_a_local_path_is_a_place_to_go_next(url, local):
    assert local_path(url) is local


@pytest.fixture
def invitation(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    lab = actions.create_group(alice, name="Vision lab", slug="vision")
    _invitation, token = actions.invite(lab.pk, alice, email="newbie@example.org")
    return lab, f"/groups/invitations/{token}/"


def _verification_link(address: str) -> str:
    message = next(message for message in reversed(mail.outbox) if address in message.to)
    return re.search(r"https?://[^/\s]+(/accounts/confirm-email/\S+)", message.body).group(1)


@pytest.mark.django_db
@pytest.mark.parametrize("verification", ["optional", "mandatory"])
def test_an_invitee_signs_up_from_the_invitation_and_the_verification_brings_them_back(
    invitation, settings, verification
):
    settings.ACCOUNT_EMAIL_VERIFICATION = verification
    lab, here = invitation
    browser = Client()
    page = browser.get(here).content.decode()
    sign_up = re.search(r'href="([^"]+)" data-invitation-signup', page).group(1)
    assert sign_up == f"/accounts/signup/?next={here}"
    form = browser.get(sign_up).content.decode()
    assert f'<input type="hidden" name="next" value="{here}">' in form

    signed_up = browser.post("/accounts/signup/", {**SIGN_UP, "email": "newbie@example.org", "next": here})
    assert signed_up.status_code == 302
    # Signed in at once where verification is optional, told to verify first where it is not.
    assert signed_up["Location"] == (here if verification == "optional" else "/accounts/confirm-email/")

    link = _verification_link("newbie@example.org")
    path, _, query = link.partition("?")
    assert unquote(query) == f"next={here}"
    # Opened in the same browser or another (a phone's mail app): back to the invitation either way.
    for opener in (browser, Client()):
        confirm = opener.get(link).content.decode()
        assert f'name="next" value="{here}"' in confirm
    confirmed = browser.post(path, {"next": here})
    assert confirmed.status_code == 302 and confirmed["Location"] == here
    if verification == "mandatory":
        # Not signed in by the confirmation: the invitation offers the sign-in, back here.
        assert b"data-invitation-signin" in browser.get(here).content
        browser.post("/accounts/login/", {"login": "newbie", "password": SIGN_UP["password1"]})
    assert b"data-invitation-unverified" not in browser.get(here).content
    joined = browser.post(here)
    assert joined.status_code == 302 and joined["Location"] == f"/groups/{lab.pk}/"


@pytest.mark.django_db
@pytest.mark.parametrize("elsewhere", ["https://evil.example/x", "//evil.example/x", "/\\evil.example/x"])
def test_a_next_that_leaves_the_site_is_ignored_at_sign_up_and_in_the_link(elsewhere, settings):
    settings.ACCOUNT_EMAIL_VERIFICATION = "optional"
    browser = Client()
    signed_up = browser.post("/accounts/signup/", {**SIGN_UP, "email": "newbie@example.org", "next": elsewhere})
    assert signed_up.status_code == 302 and signed_up["Location"] == "/"
    link = _verification_link("newbie@example.org")
    assert "next" not in link and "evil" not in link
    confirmed = browser.post(link, {"next": elsewhere})
    assert confirmed.status_code == 302 and "evil" not in confirmed["Location"]


@pytest.mark.django_db
def test_a_signed_in_invitee_is_told_the_address_must_be_verified(invitation):
    from django.contrib.auth import get_user_model

    _lab, here = invitation
    newbie = get_user_model().objects.create_user("newbie", "newbie@example.org", "pw")
    browser = Client()
    browser.force_login(newbie)
    assert b"data-invitation-unverified" in browser.get(here).content
    EmailAddress.objects.create(user=newbie, email="newbie@example.org", verified=True, primary=True)
    assert b"data-invitation-unverified" not in browser.get(here).content
