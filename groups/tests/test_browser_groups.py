"""A group's whole start in Debian's Chromium at phone width, on the real cluster with a
worker: a PI creates the group (Slurm gets its account), invites a member by e-mail, the
member follows the e-mail's link and joins; nobody's page scrolls sideways."""

import re

import pytest
from allauth.account.models import EmailAddress

from cluster.clusters.services import slurm_cli
from cluster.commands.accounts import SlurmAccounts
from groups.models import Group
from testing.browser import log_in
from testing.servers import CHROMIUM_ARGS, CHROMIUM_PATH, portal_stack
from testing.slurm import wait_for

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slurm,
    pytest.mark.first_release,
    pytest.mark.django_db(transaction=True),
]
PHONE = {"width": 390, "height": 844}


def _fits(page) -> bool:
    return page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")


def test_a_pi_creates_a_group_and_a_member_joins_from_the_email(alice, bob, provision, tmp_path):
    for user in (alice, bob):
        EmailAddress.objects.create(user=user, email=user.email, verified=True, primary=True)
    pi = provision(alice)
    provision(bob)
    mail = {"EMAIL_BACKEND": "django.core.mail.backends.filebased.EmailBackend", "EMAIL_FILE_PATH": str(tmp_path)}
    accounts = SlurmAccounts(slurm_cli())
    try:
        with playwright_api.sync_playwright() as playwright, portal_stack(worker=True, extra_env=mail) as base_url:
            browser = playwright.chromium.launch(executable_path=CHROMIUM_PATH, args=CHROMIUM_ARGS)
            try:
                page = browser.new_context(viewport=PHONE).new_page()
                errors = []
                page.on("pageerror", lambda error: errors.append(error))
                log_in(page, base_url, "alice", "pw-alice")
                page.goto(f"{base_url}/groups/")
                page.fill("#id_name", "Vision lab")
                page.fill("#id_slug", "vislab")
                page.click("form[data-group-create] button[type=submit]")
                page.wait_for_url(re.compile(r".*/groups/\d+/$"))
                expect(page.locator("h1")).to_have_text("Vision lab")
                assert _fits(page)
                # The worker writes the account; the page says so once it is there, without a reload.
                page.evaluate("window.notReloaded = true")
                group = Group.objects.get(slug="vislab")
                wait_for(
                    lambda: Group.objects.filter(pk=group.pk, slurm_state="synced").exists(),
                    timeout=60,
                    what="the group's account in Slurm",
                )
                expect(page.locator(".facts")).to_contain_text("written", timeout=15_000)
                assert page.evaluate("window.notReloaded") is True
                assert accounts.show([group.slurm_account])[group.slurm_account].users == {pi.cluster_username}

                page.fill("#id_email", bob.email)
                page.click("form[action$='/invite'] button[type=submit]")
                expect(page.locator("[data-invitations]")).to_contain_text(bob.email)
                sent = "".join(path.read_text() for path in tmp_path.iterdir())
                link = re.search(r"http://\S+/groups/invitations/\S+/", sent).group(0)

                member = browser.new_context(viewport=PHONE).new_page()
                member.on("pageerror", lambda error: errors.append(error))
                log_in(member, base_url, "bob", "pw-bob")
                member.goto(link.replace("http://127.0.0.1:8000", base_url))
                expect(member.locator("h1")).to_have_text("Join Vision lab")
                member.click("text=Join the group")
                member.wait_for_url(re.compile(rf".*/groups/{group.pk}/$"))
                expect(member.locator("table")).to_contain_text(["bob"])
                assert _fits(member)
                # A member sees no invite form; the new member's association follows.
                expect(member.locator("form[action$='/invite']")).to_have_count(0)
                wait_for(
                    lambda: len(accounts.show([group.slurm_account])[group.slurm_account].users) == 2,
                    timeout=60,
                    what="the member's association in the group's account",
                )
                assert errors == []
            finally:
                browser.close()
    finally:
        for group in Group.objects.all():
            shown = accounts.show([group.slurm_account]).get(group.slurm_account)
            for user in shown.users if shown else ():
                accounts.remove_member(group.slurm_account, user)
            accounts.delete(group.slurm_account)
            accounts.delete(group.parent_account)
