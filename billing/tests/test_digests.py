"""The weekly GPU digest: each user hears of their jobs that ended in the week (GPU-hours, mean
compute, the idle part and what it cost, to the cent), a group's PI of the group's, once a week."""

from datetime import timedelta

import pytest
from django.core import mail
from django.utils import timezone

from billing.digests import send_weekly_digests
from billing.tests.invoice_support import charge
from groups import actions as group_actions
from jobs.models import Job
from telemetry.models import JobEfficiency

pytestmark = pytest.mark.django_db


def _ended(owner, *, idle, minutes=60, group=None, days_ago=2):
    end = timezone.now() - timedelta(days=days_ago)
    job = Job.objects.create(
        owner=owner, group=group, slurm_job_id=9700 + Job.objects.count(), state="COMPLETED", exit_code=0,
        gpu_type="a100", start_time=end - timedelta(minutes=minutes), end_time=end,
    )  # fmt: skip
    JobEfficiency.objects.create(
        job=job, computed_at=end, gpu_minutes=minutes, gpu_util_mean=30, gpu_util_peak=90, gpu_memory_peak_gb=8,
        gpu_memory_asked_gb=40, idle_fraction=idle, series=[],
    )  # fmt: skip
    record = charge(owner, end, billable=3600)  # $9.00 at 0.0025 per GPU-second
    record.job = job
    record.save(update_fields=["job"])
    return job


def test_a_user_hears_of_the_idle_part_of_the_week_and_once(alice):
    _ended(alice, idle=0.5)
    _ended(alice, idle=0.0)
    _ended(alice, idle=1.0, days_ago=9)  # last week's
    assert send_weekly_digests() == 1
    (message,) = mail.outbox
    assert message.to == [alice.email] and message.subject == "Your GPU week"
    assert "Your 2 jobs that ended this week held 2.0 GPU-hours at 30 % mean compute." in message.body
    assert "0.5 GPU-hours (25%) sat idle: $4.50 of $18.00." in message.body
    assert send_weekly_digests() == 0  # the week's went
    assert len(mail.outbox) == 1


def test_a_groups_pi_hears_of_the_groups_week(alice, bob, settings):
    settings.GROUPS_SELF_SERVICE = True
    alice.emailaddress_set.create(email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    _ended(bob, idle=0.25, group=group)
    send_weekly_digests()
    to = {message.to[0]: message for message in mail.outbox}
    assert set(to) == {alice.email, bob.email}
    assert to[alice.email].subject == "Vision lab: the GPU week"
    assert "Vision lab's 1 job that ended this week" in to[alice.email].body
    assert "$2.25 of $9.00" in to[alice.email].body


def test_the_usage_page_shows_the_digests_figures_and_nobody_elses(alice, bob):
    from django.test import Client

    _ended(alice, idle=0.5)
    _ended(alice, idle=0.0)
    _ended(bob, idle=1.0)
    send_weekly_digests()
    body = next(message.body for message in mail.outbox if message.to == [alice.email])
    assert "/billing/usage/" in body
    browser = Client()
    browser.force_login(alice)
    page = browser.get("/billing/usage/").content.decode()
    # The same figures the e-mail gave: 2 jobs, 2.0 GPU-hours at 30 %, 0.5 idle, $4.50 of $18.00.
    assert "your 2 ended jobs held <strong data-week-gpu-hours>2.0</strong> GPU-hours" in page
    assert "<strong data-week-util>30 %</strong>" in page and "<strong data-week-idle>0.5</strong>" in page
    assert "<strong data-week-idle-cost>$4.50</strong> of $18.00" in page
    assert "<td>a100</td><td>2</td><td>2.0</td><td>30 %</td><td>0.5 (25 %)</td>" in page
    # bob's idle hour is his alone.
    other = Client()
    other.force_login(bob)
    assert (
        "your 1 ended job held <strong data-week-gpu-hours>1.0</strong>"
        in other.get("/billing/usage/").content.decode()
    )


def test_the_group_page_shows_the_pis_digest_figures_to_those_who_see_everyone(alice, bob, settings):
    from django.test import Client

    settings.GROUPS_SELF_SERVICE = True
    alice.emailaddress_set.create(email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    _invitation, token = group_actions.invite(group.pk, alice, email=bob.email)
    bob.emailaddress_set.create(email=bob.email, verified=True, primary=True)
    group_actions.accept_invitation(token, bob)
    _ended(bob, idle=0.25, group=group)
    send_weekly_digests()
    assert "$2.25 of $9.00" in next(m.body for m in mail.outbox if m.to == [alice.email])
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/billing/groups/{group.pk}/").content.decode()
    assert "data-group-efficiency" in page and "<strong data-week-idle-cost>$2.25</strong> of $9.00" in page
    assert "<td>bob</td><td>1</td><td>1.0</td><td>30 %</td><td>0.25 (25 %)</td>" in page
    # A member sees their own share of the money, not the group's figures.
    member = Client()
    member.force_login(bob)
    assert "data-group-efficiency" not in member.get(f"/billing/groups/{group.pk}/").content.decode()
