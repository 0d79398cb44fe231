"""/api/v1/groups/ as a client meets it: the caller's groups only, 404 for anyone else's,
the API's one refusal shape, and the schema listing every path."""

from datetime import timedelta

import pytest
from allauth.account.models import EmailAddress
from django.utils import timezone

from groups import actions
from groups.models import Allocation, Membership

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(alice):
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    return actions.create_group(alice, name="Vision lab", slug="vision")


def test_a_group_is_made_and_read_by_its_members_only(alice, bob, admin_user, api_client_for):
    as_alice, as_bob = api_client_for(alice), api_client_for(bob)
    refused = as_alice.post("/api/v1/groups/", {"name": "Lab", "slug": "lab"}, format="json")
    assert refused.status_code == 403 and "Verify" in refused.json()["detail"]
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    created = as_alice.post("/api/v1/groups/", {"name": "Lab", "slug": "lab"}, format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["slurm_account"] == "g-lab" and body["my_role"] == "pi" and body["slurm_state"] == "pending"
    assert [group["slug"] for group in as_alice.get("/api/v1/groups/").json()] == ["lab"]
    assert as_bob.get("/api/v1/groups/").json() == []
    for path in ("", "members/", "allocations/", "usage", "invitations/"):
        assert as_bob.get(f"/api/v1/groups/{body['id']}/{path}").status_code == 404, path
    assert api_client_for(admin_user).get(f"/api/v1/groups/{body['id']}/").json()["my_role"] is None


def test_bad_input_names_the_field(lab, alice, api_client_for):
    client = api_client_for(alice)
    response = client.post("/api/v1/groups/", {"name": "Other", "slug": "Bad Slug"}, format="json")
    assert response.status_code == 400 and "slug" in response.json()["errors"]
    response = client.post(f"/api/v1/groups/{lab.pk}/invitations/", {"email": "not-an-address"}, format="json")
    assert response.status_code == 400 and "email" in response.json()["errors"]


def test_invite_accept_and_leave_over_the_api(lab, alice, bob, api_client_for):
    invited = api_client_for(alice).post(f"/api/v1/groups/{lab.pk}/invitations/", {"email": bob.email}, format="json")
    assert invited.status_code == 201 and invited.json()["state"] == "open"
    assert "token" not in invited.json()  # the token travels by e-mail only
    _invitation, token = actions.invite(lab.pk, alice, email=bob.email)  # a fresh one whose token we hold
    EmailAddress.objects.create(user=bob, email=bob.email, verified=True, primary=True)
    as_bob = api_client_for(bob)
    accepted = as_bob.post("/api/v1/groups/invitations/accept", {"token": token}, format="json")
    assert accepted.status_code == 201 and accepted.json()["role"] == "member"
    members = as_bob.get(f"/api/v1/groups/{lab.pk}/members/").json()
    assert {member["username"] for member in members} == {"alice", "bob"}
    assert as_bob.get(f"/api/v1/groups/{lab.pk}/invitations/").status_code == 403  # members do not manage
    assert as_bob.delete(f"/api/v1/groups/{lab.pk}/members/{alice.pk}/").status_code == 403
    assert as_bob.delete(f"/api/v1/groups/{lab.pk}/members/{bob.pk}/").status_code == 204
    assert not Membership.objects.active().filter(user=bob).exists()


def test_allocations_over_the_api_and_the_decision_is_the_admins(lab, alice, bob, admin_user, api_client_for):
    today = timezone.now().date()
    asked = api_client_for(alice).post(
        f"/api/v1/groups/{lab.pk}/allocations/",
        {
            "gpu_type": "a100",
            "gpu_hours": 50,
            "starts_on": str(today),
            "ends_on": str(today + timedelta(days=30)),
            "justification": "Fine-tuning for the spring paper.",
        },
        format="json",
    )
    assert asked.status_code == 201, asked.json()
    allocation_id = asked.json()["id"]
    path = f"/api/v1/groups/allocations/{allocation_id}/decision"
    assert api_client_for(bob).post(path, {"approve": True}, format="json").status_code == 404
    assert api_client_for(alice).post(path, {"approve": True}, format="json").status_code == 404
    decided = api_client_for(admin_user).post(path, {"approve": True, "gpu_hours": 20}, format="json")
    assert decided.status_code == 200 and decided.json()["approved_gpu_hours"] == 20
    assert Allocation.objects.get(pk=allocation_id).decided_by == admin_user


def test_the_schema_lists_the_group_paths(client):
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json").json()
    for path in (
        "/api/v1/groups/",
        "/api/v1/groups/{id}/",
        "/api/v1/groups/{id}/members/",
        "/api/v1/groups/{id}/invitations/",
        "/api/v1/groups/{id}/allocations/",
        "/api/v1/groups/{id}/usage",
        "/api/v1/groups/invitations/accept",
    ):
        assert path in schema["paths"], path
    assert "group" in schema["components"]["schemas"]["JobSpecInput"]["properties"]


@pytest.mark.django_db
def test_ids_past_what_the_database_holds_are_404s(alice, api_client_for):
    # Found by the schema fuzzer: SQLite raised OverflowError (a 500) on the lookup.
    huge = 179081720310661547819008
    client = api_client_for(alice)
    assert client.delete(f"/api/v1/groups/{huge}/members/1/").status_code == 404
    assert client.delete(f"/api/v1/groups/1/members/{huge}/").status_code == 404
    assert client.get(f"/api/v1/groups/{huge}/members/").status_code == 404
