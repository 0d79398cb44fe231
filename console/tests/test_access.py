"""Pages and navigation by role: admin and marketing pages are theirs alone."""

import pytest
from django.urls import reverse

from cluster.models import Node
from jobs.models import Job

pytestmark = pytest.mark.django_db

ADMIN_PAGES = ["console:nodes", "console:all_jobs"]
MARKETING_PAGES = ["console:signups"]


def nav_labels(response) -> list[str]:
    return [item["label"] for item in response.context["nav_items"]]


def test_anonymous_visitors_get_the_landing_page_and_are_sent_to_log_in_elsewhere(client):
    assert client.get(reverse("console:home")).templates[0].name == "console/landing.html"
    response = client.get(reverse("jobs:list"))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_navigation_differs_by_role(client, alice, admin_user, marketer):
    client.force_login(alice)
    assert nav_labels(client.get("/")) == ["Dashboard", "GPUs", "My jobs", "New job", "Sweeps", "API tokens"]
    client.force_login(admin_user)
    assert "Nodes" in nav_labels(client.get("/"))
    client.force_login(marketer)
    labels = nav_labels(client.get("/"))
    assert "Sign-ups" in labels and "Nodes" not in labels


@pytest.mark.parametrize("page", ADMIN_PAGES + MARKETING_PAGES)
def test_a_plain_user_gets_403_on_admin_and_marketing_pages(client, alice, page):
    client.force_login(alice)
    assert client.get(reverse(page)).status_code == 403


@pytest.mark.parametrize("page", ADMIN_PAGES)
def test_marketing_gets_403_on_admin_pages(client, marketer, page):
    client.force_login(marketer)
    assert client.get(reverse(page)).status_code == 403


def test_admin_sees_nodes_with_state_and_gpus(client, admin_user):
    Node.objects.create(
        name="gpu-a100-01",
        state="MIXED",
        state_flags="DRAIN",
        reason="fan",
        gpus=[{"type": "a100", "count": 4, "used_indexes": [0, 2]}],
    )
    client.force_login(admin_user)
    body = client.get(reverse("console:nodes")).content.decode()
    assert "gpu-a100-01" in body and "MIXED+DRAIN" in body and "fan" in body and "a100 2/4" in body


def test_dashboard_counts_free_gpus_by_type_and_skips_drained_nodes(client, alice):
    Node.objects.create(name="n1", state="MIXED", gpus=[{"type": "a100", "count": 4, "used_indexes": [1]}])
    Node.objects.create(
        name="n2", state="IDLE", state_flags="DRAIN", gpus=[{"type": "a100", "count": 4, "used_indexes": []}]
    )
    client.force_login(alice)
    gpu_types = client.get("/").context["gpu_types"]
    assert gpu_types == [{"type": "a100", "total": 8, "used": 1, "free": 3}]


def test_job_pages_show_only_the_owners_jobs(client, alice, bob):
    job = Job.objects.create(owner=alice, slurm_job_id=4242, name="secret-run", state="RUNNING")
    client.force_login(bob)
    assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 404
    assert "secret-run" not in client.get(reverse("jobs:list")).content.decode()
    assert client.get(reverse("jobs:status")).json() == {"jobs": []}
    client.force_login(alice)
    assert client.get(reverse("jobs:detail", args=[job.pk])).status_code == 200
    assert [j["slurm_job_id"] for j in client.get(reverse("jobs:status")).json()["jobs"]] == [4242]


def test_the_dashboard_names_the_plan_and_says_when_it_is_paused(client, alice):
    from conftest import subscribe

    client.force_login(alice)
    page = client.get("/").content.decode()
    assert "<strong>Pro</strong>" in page and "paused" not in page
    subscribe(alice, "pro", "paused")
    assert "paused: new jobs are refused" in client.get("/").content.decode()


def test_admins_and_marketing_see_what_waits_for_them_and_users_do_not(client, alice, admin_user, marketer):
    from datetime import timedelta

    from django.utils import timezone

    from credits.actions.grants import default_campaign
    from credits.models import HeldGrant
    from reservations.models import Reservation

    client.force_login(admin_user)
    assert "Nothing waits for you" in client.get("/").content.decode()
    start = timezone.now() + timedelta(days=1)
    Reservation.objects.create(user=alice, gpu_type="a100", gpu_count=1, start=start, end=start + timedelta(hours=1))
    Node.objects.create(name="gpu-a100-09", state="IDLE", state_flags="DRAIN", gpus=[])
    page = client.get("/").content.decode()
    assert "<strong>1</strong> reservation requests to approve or reject" in page
    assert "nodes down or drained: gpu-a100-09" in page
    from groups.models import Allocation, Group

    lab = Group.objects.create(name="lab", slug="lab", created_by=alice)
    Allocation.objects.create(
        group=lab, gpu_type="a100", gpu_hours=100, starts_on=start.date(), ends_on=start.date() + timedelta(days=90),
        justification="thesis runs", requested_by=alice,
    )  # fmt: skip
    assert "<strong>1</strong> allocation requests of groups to decide" in client.get("/").content.decode()
    HeldGrant.objects.create(
        user=alice, campaign=default_campaign(), grant_kind="referral_invitee", amount=5000,
        idempotency_key="referral:invitee:1", reference="invitee:1", reason="same browser",
    )  # fmt: skip
    client.force_login(marketer)
    page = client.get("/").content.decode()
    assert "<strong>1</strong> held grants to review" in page and "reservation requests" not in page
    client.force_login(alice)
    assert "data-to-act-on" not in client.get("/").content.decode()


def test_the_job_poll_signed_out_is_a_401_that_leaves_the_csrf_cookie_alone(client):
    """A page left open polls /jobs/status.json; signed out it used to be redirected to the
    sign-in page, whose CSRF cookie then broke a sign-in form open in another tab (403)."""
    response = client.get(reverse("jobs:status"))
    assert response.status_code == 401 and "sign in again" in response.json()["detail"]
    assert "csrftoken" not in response.cookies
