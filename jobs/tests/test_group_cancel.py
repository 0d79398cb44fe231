"""A group's PI and managers cancel members' group jobs from the group's jobs page (the group
pays for them); a member, another group's manager or an outsider cannot (jobs/views.py)."""

import pytest
from allauth.account.models import EmailAddress
from django.test import Client

from audit.models import AuditLog
from groups import actions as group_actions
from groups.models import GroupRole, Membership
from jobs.models import Job, JobState

pytestmark = pytest.mark.django_db


def test_the_pi_and_managers_cancel_group_jobs_and_nobody_else(alice, bob, django_user_model):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    lab = group_actions.create_group(alice, name="Vision lab", slug="vision")
    Membership.objects.create(group=lab, user=bob, role=GroupRole.MEMBER)
    carol = django_user_model.objects.create_user("carol", "carol@x.org", "pw-carol")
    Membership.objects.create(group=lab, user=carol, role=GroupRole.MANAGER)
    waiting = [
        Job.objects.create(owner=bob, group=lab, state=JobState.SUBMITTING, name=f"run-{n}", gpu_type="a100")
        for n in range(3)
    ]
    own = Job.objects.create(owner=bob, state=JobState.SUBMITTING, name="own", gpu_type="a100")
    page = Client()
    page.force_login(alice)
    body = page.get(f"/jobs/group/{lab.pk}/").content.decode()
    assert "data-group-cancel" in body and "this cannot be undone" in body
    page.force_login(bob)  # a member: no cancel of anyone's from this page, and a 404 on the URL
    assert "data-group-cancel" not in page.get(f"/jobs/group/{lab.pk}/").content.decode()
    assert page.post(f"/jobs/group/{lab.pk}/{waiting[0].pk}/cancel").status_code == 404
    for who, job in ((alice, waiting[1]), (carol, waiting[2])):
        page.force_login(who)
        assert page.post(f"/jobs/group/{lab.pk}/{job.pk}/cancel").status_code == 302
    states = dict(Job.objects.filter(group=lab).values_list("pk", "state"))
    assert [states[job.pk] for job in waiting] == [JobState.SUBMITTING, JobState.CANCELLED, JobState.CANCELLED]
    assert AuditLog.objects.filter(action="job.cancel_for_group").count() == 2
    # The PI's power ends at the group: a member's own job is not the group's to cancel.
    page.force_login(alice)
    assert page.post(f"/jobs/group/{lab.pk}/{own.pk}/cancel").status_code == 404
    outsider = django_user_model.objects.create_user("dave", "dave@x.org", "pw-dave")
    page.force_login(outsider)
    assert page.post(f"/jobs/group/{lab.pk}/{waiting[0].pk}/cancel").status_code == 404
    assert Job.objects.get(pk=own.pk).state == JobState.SUBMITTING
