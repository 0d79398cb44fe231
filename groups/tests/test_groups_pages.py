"""The groups pages as their users meet them: a PI creates and invites, a member sees their
own usage row only, an outsider gets a 404, an invitation link signed out asks to sign up."""

from unittest import mock

import pytest
from allauth.account.models import EmailAddress

from groups import actions
from groups.models import Group, Invitation, Membership

pytestmark = pytest.mark.django_db

ROWS = [
    {"user": "alice_c", "gpu_type": "a100", "gpu_hours": "3.50"},
    {"user": "bob_c", "gpu_type": "a100", "gpu_hours": "1.25"},
]


@pytest.fixture
def lab(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    return actions.create_group(alice, name="Vision lab", slug="vision")


@pytest.fixture(autouse=True)
def accounting():
    """Slurm's accounting as the page reads it (groups.usage is tested against the cluster)."""
    with mock.patch("groups.usage.gpu_hours_by_member", return_value=ROWS) as read:
        yield read


def test_create_a_group_from_the_page(client, alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    client.force_login(alice)
    page = client.get("/groups/")
    assert b"Create a group" in page.content
    refused = client.post("/groups/", {"name": "Lab", "slug": "Bad Slug"}, follow=True)
    assert b"Not created" in refused.content and not Group.objects.exists()
    created = client.post("/groups/", {"name": "Lab", "slug": "lab"}, follow=True)
    assert created.redirect_chain and b"g-lab" in created.content


def test_the_pi_sees_everyones_usage_and_a_member_only_their_own(client, lab, alice, bob):
    alice.profile.cluster_username = "alice_c"
    alice.profile.save()
    bob.profile.cluster_username = "bob_c"
    bob.profile.save()
    Membership.objects.create(group=lab, user=bob)
    client.force_login(alice)
    page = client.get(f"/groups/{lab.pk}/").content.decode()
    assert "bob_c" in page and "3.50" in page and "group-usage-data" in page and "Send invitation" in page
    client.force_login(bob)
    page = client.get(f"/groups/{lab.pk}/").content.decode()
    assert "1.25" in page and "3.50" not in page and "Send invitation" not in page


def test_an_outsider_gets_a_404_everywhere(client, lab, bob):
    client.force_login(bob)
    assert client.get(f"/groups/{lab.pk}/").status_code == 404
    assert client.post(f"/groups/{lab.pk}/invite", {"email": "x@x.org"}).status_code == 404
    assert not Invitation.objects.exists()
    assert client.get("/groups/allocations/").status_code == 403  # the admins' page


def test_an_invitation_link_signed_out_asks_to_sign_up_then_joins(client, lab, alice, bob):
    _invitation, token = actions.invite(lab.pk, alice, email=bob.email)
    page = client.get(f"/groups/invitations/{token}/")
    assert page.status_code == 200 and b"Sign up" in page.content and b"Vision lab" in page.content
    assert client.get("/groups/invitations/not-a-token/").status_code == 404
    EmailAddress.objects.create(user=bob, email=bob.email, verified=True, primary=True)
    client.force_login(bob)
    joined = client.post(f"/groups/invitations/{token}/", follow=True)
    assert joined.status_code == 200 and Membership.objects.active().filter(group=lab, user=bob).exists()


def test_the_admins_queue_decides_a_request(client, lab, alice, admin_user):
    from datetime import timedelta

    from django.utils import timezone

    today = timezone.now().date()
    allocation = actions.request_allocation(
        lab.pk, alice, gpu_type="a100", gpu_hours=10, starts_on=today, ends_on=today + timedelta(days=30),
        justification="A semester of thesis runs.",
    )  # fmt: skip
    client.force_login(admin_user)
    page = client.get("/groups/allocations/")
    assert b"A semester of thesis runs." in page.content
    client.post("/groups/allocations/", {"allocation": allocation.pk, "decision": "refuse", "note": ""})
    allocation.refresh_from_db()
    assert allocation.state == "requested"  # a refusal needs a note
    client.post("/groups/allocations/", {"allocation": allocation.pk, "decision": "approve", "gpu_hours": "8"})
    allocation.refresh_from_db()
    assert allocation.state == "approved" and allocation.approved_gpu_hours == 8


def test_the_job_form_offers_ones_groups_with_the_default_chosen(client, lab, alice, bob):
    from django.utils import timezone

    Group.objects.filter(pk=lab.pk).update(synced_at=timezone.now())
    client.force_login(bob)
    assert b'name="group"' not in client.get("/jobs/new/").content  # bob is in no group
    client.force_login(alice)
    actions.set_default_group(alice, lab.pk)
    page = client.get("/jobs/new/").content.decode()
    assert f'<option value="{lab.pk}" selected>Vision lab (g-vision)</option>' in page


def test_the_pi_lists_every_members_group_jobs_a_member_only_their_own(client, lab, alice, bob):
    from jobs.models import Job

    carol = _verified_user("carol")
    Membership.objects.create(group=lab, user=bob)
    Job.objects.create(owner=bob, group=lab, name="bobs-run", state="RUNNING", slurm_job_id=91001)
    Job.objects.create(owner=alice, group=lab, name="alices-run", state="PENDING", slurm_job_id=91002)
    Job.objects.create(owner=bob, name="bobs-own-run", state="RUNNING", slurm_job_id=91003)  # not the group's
    client.force_login(alice)
    page = client.get(f"/jobs/group/{lab.pk}/").content.decode()
    assert "bobs-run" in page and "alices-run" in page and "bobs-own-run" not in page
    assert f'href="/jobs/{Job.objects.get(name="bobs-run").pk}/"' not in page  # a member's job page stays theirs
    client.force_login(bob)
    page = client.get(f"/jobs/group/{lab.pk}/").content.decode()
    assert "bobs-run" in page and "alices-run" not in page
    client.force_login(carol)
    assert client.get(f"/jobs/group/{lab.pk}/").status_code == 404


def _verified_user(name):
    """A user in no group (the name says what the tests above need of them)."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(name, f"{name}@x.org", "pw")


def test_slurms_accounting_is_read_once_a_minute_for_all_processes_and_without_redis_still_read(
    client, lab, alice, accounting
):
    """Each process kept its own minute: 16 clients on two web processes asked sacct per request."""
    from django.core.cache import caches

    client.force_login(alice)
    assert client.get(f"/api/v1/groups/{lab.pk}/usage").status_code == 200
    caches["default"].clear()  # another process: nothing of this one's memory
    assert client.get(f"/api/v1/groups/{lab.pk}/usage").status_code == 200
    assert accounting.call_count == 1
    with mock.patch.object(caches["shared"], "get", side_effect=ConnectionError("redis down")):
        assert client.get(f"/api/v1/groups/{lab.pk}/usage").status_code == 200
    assert accounting.call_count == 2
