import pytest

from accounts.models import ApiToken
from jobs.models import Job
from testing.api import one_connection

GOOD_SPEC = {
    "name": "mnist",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_count": 1,
    "command": "echo hello from the job",
    "time_limit_minutes": 5,
}

# The schema fuzzers' user's token (test_api_schema_fuzz*.py): fixed, because the schema (and its
# auth) is loaded when the tests are collected, before any user exists; `fuzz_user` has it.
FUZZ_TOKEN = ApiToken.PREFIX + "schemathesis-fuzzing-user"


@pytest.fixture
def _one_connection():
    with one_connection():
        yield


@pytest.fixture
def fuzz_user(alice, settings, _one_connection):
    # Provisioned as far as the portal can tell (alice is on the Pro plan).
    alice.profile.cluster_username = "alice"
    alice.profile.provisioned_at = "2026-01-01T00:00:00Z"
    alice.profile.save()
    # Logs are read many times a second here; their throttle has its own test.
    settings.API_LOG_READS_PER_MINUTE = 100_000
    ApiToken.objects.create(
        user=alice, name="schemathesis", key_hash=ApiToken.hash_key(FUZZ_TOKEN), hint=FUZZ_TOKEN[:12]
    )
    # A finished job of the user's, so that clone and logs can find one.
    Job.objects.create(owner=alice, slurm_job_id=7001, state="COMPLETED", spec=dict(GOOD_SPEC), exit_code=0)
    return alice
