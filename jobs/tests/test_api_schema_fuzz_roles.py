"""schemathesis over the operations only another role may call: the general fuzz test's user is no
admin and no marketer, so there an allocation's decision and a campaign's list, creation and approval
answer 403 before a body is read. Here each is called by its own role, on a row that is there to
decide (an allocation a group asked for; a campaign another marketer made, waiting for approval),
so their 200s, 400s and 409s are checked against the schema too."""

from datetime import date

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.core.parameters import ParameterLocation

from accounts.models import ApiToken, Role
from credits.models import Campaign
from gpupool.wsgi import application
from groups import actions as group_actions
from testing.api import one_connection, rolled_back

pytestmark = pytest.mark.django_db

TOKEN = ApiToken.PREFIX + "schemathesis-another-role"
# Schema-valid is not always valid: a refusal without a note, a campaign whose code is taken or whose
# window ends before it starts; those are 400s naming the field.
CHECKED_BEYOND_THE_SCHEMA = ["groups_allocation_decide", "campaigns_create"]
CONFIG = schemathesis.Config.from_dict(
    {
        "auth": {"openapi": {"bearerAuth": {"bearer": TOKEN}}},
        "generation": {"max-examples": 30, "mode": "all", "deterministic": True},
        "checks": {"enabled": True},
        "operations": [
            {
                "include-operation-id": CHECKED_BEYOND_THE_SCHEMA,
                "checks": {
                    "positive_data_acceptance": {"expected-statuses": ["2xx", "400", "401", "403", "404", "409"]}
                },
            }
        ],
    }
)
ROLE_OF = {"/api/v1/groups/allocations/": Role.ADMIN, "/api/v1/campaigns/": Role.MARKETING}
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG).exclude(
    path_regex=r"^(?!/api/v1/(groups/allocations|campaigns)/)"
)


@pytest.fixture
def rows(admin_user, marketer, alice, django_user_model, settings):
    """An allocation alice's group asked for, and a campaign that waits for a second marketer."""
    alice.emailaddress_set.create(email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Fuzz lab", slug="fuzzlab")
    allocation = group_actions.request_allocation(
        group.pk,
        alice,
        gpu_type="a100",
        gpu_hours=100,
        starts_on=date(2026, 12, 1),
        ends_on=date(2027, 3, 1),
        justification="thesis runs",
    )
    settings.CAMPAIGN_APPROVAL_GPU_SECONDS = 1_000_000
    other = django_user_model.objects.create_user("mara", "mara@x.org", "pw-mara")
    other.profile.role = Role.MARKETING
    other.profile.save()
    campaign = Campaign.objects.create(
        name="Big", code="big", start="2026-01-01T00:00:00Z", budget_gpu_seconds=2_000_000, created_by=other
    )
    with one_connection():
        yield {"admin": admin_user, "marketing": marketer, "allocation": allocation.pk, "campaign": campaign.pk}


@schema.parametrize()
@hypothesis_settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=20)
def test_every_operation_of_another_role_conforms_when_that_role_calls_it(case, rows):
    role = next(role for prefix, role in ROLE_OF.items() if case.operation.path.startswith(prefix))
    caller = rows["admin" if role == Role.ADMIN else "marketing"]
    ApiToken.objects.get_or_create(
        key_hash=ApiToken.hash_key(TOKEN), defaults={"user": caller, "name": "fuzz", "hint": TOKEN[:12]}
    )
    ApiToken.objects.filter(key_hash=ApiToken.hash_key(TOKEN)).update(user=caller)
    # A case whose path was made invalid keeps it (a 404 or 400, as in the general test).
    if not (case._meta is not None and case._meta.is_negative_at(ParameterLocation.PATH)):
        parameters = dict(case.path_parameters or {})
        if "allocation_id" in parameters:
            parameters["allocation_id"] = rows["allocation"]
        if "id" in parameters:
            parameters["id"] = rows["campaign"]
        case.path_parameters = parameters or case.path_parameters
    with rolled_back():
        response = case.call_and_validate()
    if response.status_code >= 400:
        assert response.json()["detail"].strip()
