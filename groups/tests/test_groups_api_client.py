"""A client generated from the served schema (openapi-python-client) creates a group, invites
a member who joins, asks for GPU time and sets the group's budget; another user's client sees
none of it. No Slurm:
the group's Slurm side is sent on commit to a worker that is not running here."""

import importlib
from datetime import date

import pytest
from allauth.account.models import EmailAddress

from accounts.models import ApiToken
from groups.models import Invitation
from jobs.tests.test_api_client import PACKAGE, client_package, generate_client  # noqa: F401
from testing.servers import portal_stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_generated_client_runs_a_group(alice, bob, client_package):  # noqa: F811
    for user in (alice, bob):
        EmailAddress.objects.create(user=user, email=user.email, verified=True, primary=True)
    _token, alice_key = ApiToken.issue(alice, "generated client")
    _token, bob_key = ApiToken.issue(bob, "generated client")
    with portal_stack() as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        api = importlib.import_module(f"{PACKAGE}.api.groups")
        models = importlib.import_module(f"{PACKAGE}.models")

        def call(name):
            return importlib.import_module(f"{api.__name__}.{name}")

        as_alice = client_module.AuthenticatedClient(base_url=base_url, token=alice_key)
        as_bob = client_module.AuthenticatedClient(base_url=base_url, token=bob_key)
        group = call("groups_create").sync(client=as_alice, body=models.GroupInput(name="Vision lab", slug="vision"))
        assert group.slurm_account == "g-vision" and group.my_role == "pi"
        assert call("groups_retrieve").sync_detailed(client=as_bob, id=group.id).status_code == 404
        assert call("groups_list").sync(client=as_bob) == []

        invited = call("groups_invite").sync(client=as_alice, id=group.id, body=models.InvitationInput(email=bob.email))
        assert invited.email == bob.email
        # The token travels by e-mail only; the test takes a fresh one the way the e-mail would carry it.
        from groups import actions

        _invitation, token = actions.invite(group.id, alice, email=bob.email)
        joined = call("groups_invitation_accept").sync(client=as_bob, body=models.AcceptInput(token=token))
        assert joined.role == models.GroupRoleEnum.MEMBER
        members = call("groups_members_list").sync(client=as_bob, id=group.id)
        assert {member.username for member in members} == {"alice", "bob"}
        refused = call("groups_allocation_request").sync_detailed(
            client=as_bob,
            id=group.id,
            body=models.AllocationInput(
                gpu_type=models.GpuTypeEnum("a100"),
                gpu_hours=10,
                starts_on=date(2099, 1, 1),
                ends_on=date(2099, 2, 1),
                justification="A member may not ask.",
            ),
        )
        assert refused.status_code == 403

        # Money: the PI sets the budget, a member may not, and the member's view is their share.
        budget = call("groups_budget_set").sync(
            client=as_alice, id=group.id, body=models.BudgetInput(monthly_amount="250", hold_at_limit=True)
        )
        assert (budget.monthly_amount, budget.hold_at_limit) == ("250.00", True)
        assert (
            call("groups_budget_set")
            .sync_detailed(client=as_bob, id=group.id, body=models.BudgetInput(monthly_amount="1"))
            .status_code
            == 403
        )
        money = call("groups_money").sync(client=as_bob, id=group.id)
        assert money.plan is None and money.spent is None and money.shares == [] and money.total == "0.00"
        assert call("groups_money").sync(client=as_alice, id=group.id).credit_pool == 0
        assert (
            call("groups_plan_set")
            .sync_detailed(client=as_alice, id=group.id, body=models.PlanInput(plan="pro"))
            .status_code
            == 403
        )
    assert Invitation.objects.filter(state="accepted").count() == 1
