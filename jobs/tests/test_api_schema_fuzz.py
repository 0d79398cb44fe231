"""schemathesis against the portal's own schema: every operation, every check, and the
schema's links followed from a submitted job to its page, logs, cancel and clone.

In-process over WSGI on the test database: a submission is recorded as SUBMITTING, and its
task is enqueued on commit, which never comes inside the test's transaction, so nothing
reaches Slurm."""

import pytest
import schemathesis
from django.db import transaction
from hypothesis import HealthCheck
from hypothesis import settings as hypothesis_settings

from gpupool.wsgi import application
from jobs.tests.conftest import FUZZ_TOKEN
from testing.api import rolled_back

pytestmark = pytest.mark.django_db

# Schema-valid is not always valid: the image must be pinned and allowed by the plan, a
# GPU type must be in the plan, gpu_count or gpu_memory_gb (one of them) within the type's
# size. Those answers are 400s, whose body the schema checks still validate.
# Bodies the schema cannot fully describe (plan rules; a reservation's window must lie ahead on
# the grid, its members exist; a plan switch names its plan): a 400 to schema-valid data is an
# answer, not a failure.
# Groups: a short name taken, an unverified creator, a period that ends before it starts or ahead
# of a year, a refusal without a note, a token that names no invitation. Datasets: a name that
# could not be a mount point. Sweeps: a base job as above, and parameters the schema cannot
# describe (a value the shell could misread, a grid of more points than allowed). Sessions: a job's
# body as above, and an image that does not ship the app. A quote: a job's body as above (a dataset
# version, a group or a cluster that is not the caller's to use). A tus upload's headers depend on
# each other (Upload-Length unless a final concatenation; a path unless a part). A sweep's tasks
# sort by its own parameters' names, which the schema cannot list. A job list's `cluster` is one of
# the clusters or of the caller's jobs' clusters, which change at run time. A dataset's registered
# folder is a path on the cluster that must exist and be the caller's.
SUBMISSIONS = [
    "jobs_create", "jobs_submit", "jobs_clone", "reservations_create", "reservations_reject", "plan_change",
    "groups_create", "groups_invite", "groups_member_role", "groups_invitation_accept", "groups_allocation_request",
    "groups_allocation_decide", "datasets_create", "sweeps_create", "sweeps_clone", "sessions_create",
    "billing_quote", "datasets_upload_create", "sweeps_tasks", "jobs_list", "jobs_export",
    "datasets_version_register",
]  # fmt: skip
# tus answers a missing or other Tus-Resumable with 412 Precondition Failed, as the protocol says.
TUS_OPERATIONS = ["datasets_upload_create", "datasets_upload_patch"]
TUS_REFUSALS = ["400", "401", "403", "404", "405", "409", "412", "413", "415"]
# A tus PATCH's body is raw bytes: sent as application/octet-stream would be.
schemathesis.serializer.alias("application/offset+octet-stream", "application/octet-stream")
POSITIVE_WITH_BAD_VALUES = ["2xx", "400", "401", "403", "404", "409", "429"]


TOKEN = FUZZ_TOKEN
CONFIG = schemathesis.Config.from_dict(
    {
        "auth": {"openapi": {"bearerAuth": {"bearer": TOKEN}}},
        # The same cases every run, so a failure in `make test` is one anybody can replay;
        # pytest --hypothesis-seed=N explores others.
        "generation": {"max-examples": 40, "mode": "all", "deterministic": True},
        "phases": {"stateful": {"max-steps": 8}},
        "checks": {"enabled": True},
        "operations": [
            {
                "include-operation-id": SUBMISSIONS,
                "checks": {"positive_data_acceptance": {"expected-statuses": POSITIVE_WITH_BAD_VALUES}},
            },
            {
                "include-operation-id": TUS_OPERATIONS,
                "checks": {
                    "negative_data_rejection": {"expected-statuses": TUS_REFUSALS},
                    "missing_required_header": {"expected-statuses": TUS_REFUSALS},
                },
            },
        ],
    }
)


# Loaded from the app (no server): the schema is public, so no database is needed yet.
schema = schemathesis.openapi.from_wsgi("/api/schema/?format=json", application, config=CONFIG)


@schema.parametrize()
@hypothesis_settings(deadline=None, suppress_health_check=list(HealthCheck))
def test_every_operation_conforms_to_the_schema(case, fuzz_user):
    # Each example starts from the same database, so Hypothesis can replay one it found.
    with rolled_back():
        response = case.call_and_validate()
    # The schema check above validates a refusal's shape; it must also say something.
    if response.status_code >= 400:
        assert response.json()["detail"].strip()


class Scenarios(schema.as_state_machine()):
    """Sequences along the schema's links: submit, then read, cancel, clone the job."""

    def setup(self):
        # Each scenario starts from the same database, so Hypothesis can replay one it found.
        self._savepoint = transaction.savepoint()

    def teardown(self):
        transaction.savepoint_rollback(self._savepoint)


def test_linked_operations_conform_statefully(fuzz_user):
    Scenarios.run(
        settings=hypothesis_settings(
            max_examples=30,
            deadline=None,
            stateful_step_count=8,
            derandomize=True,
            suppress_health_check=list(HealthCheck),
        )
    )
