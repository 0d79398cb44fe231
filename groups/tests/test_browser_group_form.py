"""The group form and the invitation link in Debian's Chromium at phone width, the web process
alone (Slurm is not asked: the group's account waits for a worker).

The form refuses a name of digits alone and one with private-use characters on the name field,
keeps what was typed, and offers no organisation to a user who has nothing to choose. A
signed-out invitee signs up from the invitation's link, the verification e-mail brings them
back to it, and they join."""

import re

import pytest
from allauth.account.models import EmailAddress

from groups import actions
from groups.models import Group, Membership
from testing.browser import chromium_page, log_in
from testing.servers import portal_stack

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def _fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_the_group_form_says_what_is_wrong_with_a_name(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    with chromium_page(playwright_api, width=390, height=844) as page, portal_stack() as base_url:
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        log_in(page, base_url, "alice", "pw-alice")
        page.goto(f"{base_url}/groups/")
        expect(page.locator("#id_organization")).to_have_count(0)
        expect(page.locator("[data-organization-fixed]")).to_contain_text("pool")

        page.fill("#id_name", "0" * 80)  # the field takes 60 of them
        page.fill("#id_slug", "zeros")
        page.click("form[data-group-create] button[type=submit]")
        expect(page.locator('[data-field-error="name"]')).to_contain_text("needs at least one letter")
        expect(page.locator("[data-form-error]")).to_contain_text("Not created")
        assert page.input_value("#id_slug") == "zeros"

        page.fill("#id_name", "Lab \ue000\ue001\ue002")
        page.click("form[data-group-create] button[type=submit]")
        expect(page.locator('[data-field-error="name"]')).to_contain_text("a private-use character (U+E000")
        assert _fits(page)
        assert not Group.objects.exists()

        page.fill("#id_name", "Vision lab")
        page.click("form[data-group-create] button[type=submit]")
        page.wait_for_url(re.compile(r".*/groups/\d+/$"))
        expect(page.locator("h1")).to_have_text("Vision lab")
        assert errors == []


def test_an_invitee_signs_up_from_the_link_and_comes_back_to_join(alice, tmp_path):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    lab = actions.create_group(alice, name="Vision lab", slug="vision")
    _invitation, token = actions.invite(lab.pk, alice, email="nora@example.org")
    mail = {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend", "EMAIL_FILE_PATH": str(tmp_path)}
    with (
        chromium_page(playwright_api, width=390, height=844) as page,
        portal_stack(extra_env={**mail, "ACCOUNT_EMAIL_VERIFICATION": "optional"}) as base_url,
    ):
        errors = []
        page.on("pageerror", lambda error: errors.append(error))
        invitation = f"{base_url}/groups/invitations/{token}/"
        page.goto(invitation)
        expect(page.locator("h1")).to_have_text("Join Vision lab")
        page.click("[data-invitation-signup]")
        page.wait_for_url(re.compile(r".*/accounts/signup/\?next=.*"))
        page.fill("input[name=email]", "nora@example.org")
        page.fill("input[name=username]", "nora")
        page.fill("input[name=password1]", "a-long-enough-pass-77")
        page.fill("input[name=password2]", "a-long-enough-pass-77")
        page.click("main form button[type=submit]")
        page.wait_for_url(invitation)  # signed in, back at the invitation
        expect(page.locator("[data-invitation-unverified]")).to_be_visible()

        sent = "".join(path.read_text() for path in tmp_path.iterdir())
        link = re.search(r"(/accounts/confirm-email/\S+)", sent).group(1)
        assert f"next=%2Fgroups%2Finvitations%2F{token}%2F" in link
        page.goto(base_url + link)
        page.click("main form button[type=submit]")
        page.wait_for_url(invitation)  # verified, and back again
        expect(page.locator("[data-invitation-unverified]")).to_have_count(0)
        page.click("text=Join the group")
        page.wait_for_url(f"{base_url}/groups/{lab.pk}/")
        assert Membership.objects.active().filter(group=lab, user__username="nora").exists()
        assert _fits(page)
        assert errors == []
