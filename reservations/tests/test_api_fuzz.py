"""schemathesis over the reservation operations with rows to find: jobs' fuzz test covers
them too, but its user has no reservation and is no admin, so there every read and decision
is a 404. Here the caller is an admin with a pool to reserve from, and each generated
request is also sent to a reservation of their own and one of another user's, so approve,
reject and cancel answer with their 200s, 400s and 409s, each checked against the schema.

Slurm is a stand-in here (every example is rolled back; a real reservation would not be):
the real approval is test_api_cluster.py's."""

from datetime import UTC, datetime, time, timedelta

import pytest
import schemathesis
from django.utils import timezone
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from accounts.models import ApiToken
from cluster.models import Node
from gpupool.wsgi import application
from reservations import actions
from reservations.models import Reservation
from testing.api import one_connection, rolled_back

pytestmark = pytest.mark.django_db

TOKEN = ApiToken.PREFIX + "schemathesis-reservations-admin"
# Schema-valid is not always valid: a start in the past or off the grid, a window longer
# than the plan's, an unknown member, a blank reason. Those are 400s naming the field,
# whose bodies the schema checks still validate.
CHECKED_BEYOND_THE_SCHEMA = ["reservations_create", "reservations_reject"]
CONFIG = schemathesis.Config.from_dict(
    {
        "auth": {"openapi": {"bearerAuth": {"bearer": TOKEN}}},
        "generation": {"max-examples": 40, "mode": "all", "deterministic": True},
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
# Only the reservation operations: an exclusion, because schemathesis ORs an include with
# the config's per-operation entries (which would let every operation back in).
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG).exclude(
    path_regex=r"^(?!/api/v1/reservations/)"
)


class StandInSlurm:
    """Accepts every reservation and holds none."""

    def create_gpu_reservation(self, request):
        return None

    def show_reservation(self, name):
        return None

    def delete_reservation(self, name, check=True):
        return None


@pytest.fixture
def fuzz_admin(admin_user, alice, monkeypatch):
    monkeypatch.setattr(actions, "reservation_gateway", StandInSlurm)
    monkeypatch.setattr(actions, "maintenance_holds", lambda: [])
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE", gpus=[{"type": "a100", "count": 4, "used_indexes": []}])
    ApiToken.objects.create(user=admin_user, name="fuzz", key_hash=ApiToken.hash_key(TOKEN), hint=TOKEN[:12])
    start = datetime.combine(timezone.now().date() + timedelta(days=2), time(10), tzinfo=UTC)
    rows = [
        Reservation.objects.create(
            user=user, gpu_type="a100", gpu_count=2, start=start, end=start + timedelta(hours=2), purpose="fuzz"
        )
        for user in (admin_user, alice)
    ]
    with one_connection():
        yield [row.pk for row in rows]


@schema.parametrize()
@hypothesis_settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_reservation_operations_conform_with_rows_to_find(case, fuzz_admin):
    ids = [None]
    if "id" in (case.path_parameters or {}):
        ids += fuzz_admin
    for pk in ids:
        if pk is not None:
            case.path_parameters = {**case.path_parameters, "id": pk}
        with rolled_back():
            response = case.call_and_validate()
        if response.status_code >= 400:
            assert response.json()["detail"].strip()
