"""The OpenAPI schema says what the API does: JSON bodies, the bearer token, every refusal
with its body, and which fields can be null; and the fields say what the job is."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.api.serializers import JobSpecInputSerializer
from jobs.models import Job
from jobs.submission.spec import FIELDS
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    return response.json()


# The job API's own paths; other apps' operations are checked by their own tests.
JOBS = ("/api/v1/jobs/", "/api/v1/resources/")


def _operations(schema):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            yield path, method, operation


def test_the_schema_is_public_and_lists_the_readmes_paths(client):
    # Public on purpose: client generators fetch it without credentials.
    response = APIClient().get("/api/schema/?format=json", HTTP_AUTHORIZATION="Bearer not-a-token")
    assert response.status_code == 200
    paths = set(response.json()["paths"])
    assert {
        "/api/v1/jobs/",
        "/api/v1/jobs/submit",
        "/api/v1/jobs/{id}/",
        "/api/v1/jobs/{id}/logs",
        "/api/v1/jobs/{id}/cancel",
        "/api/v1/jobs/{id}/clone",
        "/api/v1/jobs/{id}/files/",
        "/api/v1/jobs/{id}/files/{file_path}",
        "/api/v1/jobs/{id}/archive",
        "/api/v1/jobs/export",
        "/api/v1/resources/usage",
    } == {path for path in paths if path.startswith(JOBS)}
    assert "/api/v1/billing/quote" in paths


def test_every_operation_accepts_the_bearer_token(schema):
    scheme = schema["components"]["securitySchemes"]["bearerAuth"]
    assert scheme["type"] == "http" and scheme["scheme"] == "bearer"
    for path, method, operation in _operations(schema):
        assert {"bearerAuth": []} in operation["security"], (method, path)


def test_bodies_are_json_only(schema):
    bodies = [operation["requestBody"] for _p, _m, operation in _operations(schema) if "requestBody" in operation]
    job_bodies = [p for p, _m, operation in _operations(schema) if "requestBody" in operation and p.startswith(JOBS)]
    assert len(job_bodies) == 3  # create, submit, clone
    # The one exception: a tus upload's bytes, raw in the PATCH body (docs/datasets.md).
    tus = schema["paths"]["/api/v1/datasets/{id}/versions/{number}/uploads/{upload_id}"]["patch"]["requestBody"]
    assert list(tus["content"]) == ["application/offset+octet-stream"]
    for body in bodies:
        if body is not tus:
            assert list(body["content"]) == ["application/json"]


def test_every_refusal_is_declared_with_its_body(schema):
    expected = {
        ("get", "/api/v1/jobs/"): {"400", "401", "404"},
        ("post", "/api/v1/jobs/"): {"400", "401", "403", "409", "413", "415", "429"},
        ("post", "/api/v1/jobs/submit"): {"400", "401", "403", "409", "413", "415", "429"},
        ("get", "/api/v1/jobs/{id}/"): {"401", "404"},
        ("get", "/api/v1/jobs/{id}/logs"): {"401", "404", "429"},
        ("post", "/api/v1/jobs/{id}/cancel"): {"401", "403", "404", "409"},
        ("post", "/api/v1/jobs/{id}/clone"): {"400", "401", "403", "404", "409", "413", "415", "429"},
        ("get", "/api/v1/resources/usage"): {"401"},
        ("get", "/api/v1/jobs/export"): {"400", "401", "404"},
        ("get", "/api/v1/jobs/{id}/files/"): {"400", "401", "404"},
        ("get", "/api/v1/jobs/{id}/files/{file_path}"): {"400", "401", "404"},
        ("get", "/api/v1/jobs/{id}/archive"): {"400", "401", "404"},
    }
    for path, method, operation in _operations(schema):
        refusals = {code: response for code, response in operation["responses"].items() if code >= "400"}
        if path.startswith(JOBS):
            assert set(refusals) == expected[(method, path)], (method, path)
        assert "401" in refusals, (method, path)  # every operation: its refusals have the one body
        for code, response in refusals.items():
            body = response["content"]["application/json"]["schema"]
            if path.startswith(JOBS):
                assert body == {"$ref": "#/components/schemas/Error"}
            # Every app's refusals carry at least the one shape: `detail`, `errors` by field.
            declared = schema["components"]["schemas"][body["$ref"].split("/")[-1]]
            assert {"detail", "errors"} <= set(declared["properties"]), (method, path, code)
            if code == "429":
                assert response["headers"]["Retry-After"]["required"] is True
    assert schema["components"]["schemas"]["Error"]["required"] == ["detail"]


def test_fields_that_can_be_null_are_nullable(schema):
    job = schema["components"]["schemas"]["Job"]["properties"]
    for name in [
        "slurm_job_id",
        "submit_time",
        "start_time",
        "end_time",
        "expected_start",
        "expected_end",
        "elapsed_seconds_so_far",
        "exit_code",
        "elapsed_seconds",
        "time_limit_minutes",
    ]:
        assert job[name].get("nullable") is True, name
    assert job["expected_start"]["format"] == "date-time"
    assert "nullable" not in job["gpu_count"]  # 0 for a job without GPUs, never null


def test_the_submission_body_lists_exactly_the_specs_fields(schema):
    body = schema["components"]["schemas"]["JobSpecInput"]
    # The spec's fields, where to run, who pays and whether right-sizing may change the ask: a reservation,
    # a cluster, a group and keep_whole_gpu are not part of the spec (jobs.submission.intake).
    assert (
        set(body["properties"])
        == set(FIELDS) | {"reservation", "cluster", "group", "keep_whole_gpu"}
        == set(JobSpecInputSerializer().fields)
    )
    assert body["additionalProperties"] is False  # unknown fields are refused
    assert set(body["properties"]["gpu_type"]["allOf"][0]["$ref"].split("/")[-1:]) == {"GpuTypeEnum"}
    assert not schema["components"]["schemas"]["JobCloneInput"].get("required")


def test_a_submitted_job_links_to_its_operations(schema):
    links = schema["paths"]["/api/v1/jobs/"]["post"]["responses"]["201"]["links"]
    assert {link["operationId"] for link in links.values()} == {
        "jobs_retrieve",
        "jobs_logs",
        "jobs_cancel",
        "jobs_clone",
    }
    operation_ids = {operation["operationId"] for _p, _m, operation in _operations(schema)}
    assert {link["operationId"] for link in links.values()} <= operation_ids


def _api_job(user, api_client_for, **fields):
    job = Job.objects.create(owner=user, **fields)
    return api_client_for(user).get(f"/api/v1/jobs/{job.pk}/").json()


def test_a_running_gpu_job_counts_its_gpus(alice, api_client_for):
    running = _api_job(
        alice,
        api_client_for,
        slurm_job_id=8101,
        state="RUNNING",
        tres_per_node="gres/gpu:a100:2",
        allocated_tres="cpu=2,mem=2000M,node=1,billing=2,gres/gpu=2,gres/gpu:a100=2",
        start_time=timezone.now(),
    )
    assert running["gpu_count"] == 2


def test_a_waiting_job_counts_the_gpus_it_asked_for(alice, api_client_for):
    submitting = _api_job(alice, api_client_for, state="SUBMITTING", tres_per_node="gres/gpu:h100:2")
    pending = _api_job(alice, api_client_for, state="PENDING", slurm_job_id=8102, tres_per_node="gres/gpu:a100:1")
    assert (submitting["gpu_count"], pending["gpu_count"]) == (2, 1)


def test_a_shard_job_counts_the_one_gpu_it_shares(alice, api_client_for):
    shard = _api_job(
        alice,
        api_client_for,
        slurm_job_id=8103,
        state="RUNNING",
        tres_per_node="gres/shard:a100:3",
        allocated_tres="cpu=1,mem=1000M,node=1,billing=1,gres/shard=3,gres/shard:a100=3",
        gpu_allocation={"gpu-a100-01": [2]},
    )
    assert shard["gpu_count"] == 1


def test_a_job_without_gpus_counts_none(alice, api_client_for):
    assert _api_job(alice, api_client_for, slurm_job_id=8104, state="RUNNING", allocated_tres="cpu=1")["gpu_count"] == 0


def test_a_finished_job_keeps_the_accounted_gpus(alice, api_client_for):
    finished = _api_job(alice, api_client_for, slurm_job_id=8105, state="COMPLETED", gpu_count=4, exit_code=0)
    assert finished["gpu_count"] == 4


@pytest.mark.parametrize("state", ["SUBMITTING", "PENDING", "RUNNING", "COMPLETING", "SUSPENDED"])
def test_no_exit_code_before_the_job_ends(alice, api_client_for, state):
    # Slurm reports exit code 0 for a running job; that is not how it ended.
    assert _api_job(alice, api_client_for, slurm_job_id=8106, state=state, exit_code=0)["exit_code"] is None


@pytest.mark.parametrize("state, code", [("COMPLETED", 0), ("FAILED", 3), ("CANCELLED", 0)])
def test_the_exit_code_of_an_ended_job(alice, api_client_for, state, code):
    assert _api_job(alice, api_client_for, slurm_job_id=8107, state=state, exit_code=code)["exit_code"] == code


def test_a_submitted_jobs_fields_match_the_schema(alice, api_client_for, schema):
    """A fresh submission (no Slurm id, no times yet) reads back with every declared field."""
    alice.profile.cluster_username = "alice"
    alice.profile.provisioned_at = timezone.now()
    alice.profile.save()
    body = api_client_for(alice).post("/api/v1/jobs/", GOOD_SPEC, format="json").json()
    declared = schema["components"]["schemas"]["Job"]
    assert set(body) == set(declared["properties"])
    for name, value in body.items():
        if value is None:
            assert declared["properties"][name].get("nullable"), name
    assert body["gpu_count"] == 1 and body["exit_code"] is None and body["expected_start"] is None
