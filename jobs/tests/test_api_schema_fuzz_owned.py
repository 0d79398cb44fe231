"""schemathesis against every operation on objects the caller owns: the general fuzz test
(test_api_schema_fuzz.py) draws random ids, which name nothing and answer 404 before a body or
a query parameter is read; here each `{id}` names the caller's own job, sweep, group, dataset,
invoice, session, so the rest of the request is what the operation answers, and their lists show them."""

import re
from datetime import date

import pytest
import schemathesis
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings
from schemathesis.core.parameters import ParameterLocation

from billing.models import Invoice
from datasets.models import DatasetVersion
from gpupool.wsgi import application
from jobs.models import Job, JobState, Sweep
from jobs.tests.conftest import GOOD_SPEC
from jobs.tests.test_api_schema_fuzz import CONFIG
from testing.api import one_connection, rolled_back

pytestmark = pytest.mark.django_db

# A session's body: a job's, less the command and spot (the portal runs the app).
SESSION_SPEC = {key: value for key, value in GOOD_SPEC.items() if key not in ("command", "spot", "environment")}

# The operations on one of them, and their lists (which show them).
OWNED = re.compile(r"^/api/v1/(jobs|sweeps|groups|datasets|invoices|sessions)/(\{id\}|$)")
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG).include(
    path_regex=OWNED.pattern
)


@pytest.fixture
def owned(fuzz_user, api_client_for):
    """One of each kind of object, the fuzzing user's, made through the API as a client would."""
    client = api_client_for(fuzz_user)
    fuzz_user.emailaddress_set.create(email=fuzz_user.email or "alice@example.org", verified=True, primary=True)
    group = client.post("/api/v1/groups/", {"name": "Fuzzing lab", "slug": "fuzzlab"}, format="json")
    assert group.status_code == 201, group.content
    sweep = client.post("/api/v1/sweeps/", {**GOOD_SPEC, "parameters": {"lr": [1, 2]}}, format="json")
    assert sweep.status_code == 201, sweep.content
    # Its tasks ended, one failed: rerun, tasks and cost have something to answer.
    Job.objects.filter(sweep_id=sweep.json()["id"]).update(state=JobState.COMPLETED)
    Job.objects.filter(sweep_id=sweep.json()["id"], sweep_index=1).update(state=JobState.FAILED)
    dataset = client.post("/api/v1/datasets/", {"name": "fuzzset"}, format="json")
    assert dataset.status_code == 201, dataset.content
    assert client.post(f"/api/v1/datasets/{dataset.json()['id']}/versions/", format="json").status_code == 201
    invoice = Invoice.objects.create(user=fuzz_user, period=date(2026, 1, 1))
    session = client.post("/api/v1/sessions/", {**SESSION_SPEC, "kind": "jupyterlab"}, format="json")
    assert session.status_code == 201, session.content
    # The test client's requests connect the handler's connection closing again: undo it.
    with one_connection():
        yield {
            "jobs": Job.objects.filter(owner=fuzz_user, sweep=None).values_list("pk", flat=True).first(),
            "sweeps": sweep.json()["id"],
            "groups": group.json()["id"],
            "datasets": dataset.json()["id"],
            "invoices": invoice.pk,
            "sessions": session.json()["id"],
        }


@schema.parametrize()
@hypothesis_settings(deadline=None, suppress_health_check=list(HealthCheck), max_examples=20)
def test_every_operation_on_the_callers_own_objects_conforms(case, owned):
    kind = OWNED.match(case.operation.path)
    if kind is None:
        pytest.skip("the general fuzz test covers it")
    # A case whose path was made invalid keeps it (a 404 or 400, as in the general test).
    path_made_invalid = case._meta is not None and case._meta.is_negative_at(ParameterLocation.PATH)
    if "{id}" in case.operation.path and not path_made_invalid:
        case.path_parameters = {**(case.path_parameters or {}), "id": owned[kind.group(1)]}
    if "number" in case.path_parameters:
        case.path_parameters["number"] = DatasetVersion.objects.get(dataset_id=owned["datasets"]).number
    with rolled_back():
        response = case.call_and_validate()
    if response.status_code >= 400:
        assert response.json()["detail"].strip()
    assert Sweep.objects.filter(pk=owned["sweeps"]).exists()
