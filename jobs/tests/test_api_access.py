"""Who may do what through the API: the owner only; plans' quotas; the submit rate limit."""

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from accounts.models import ApiToken
from conftest import subscribe
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db


@pytest.fixture
def alices_job(alice):
    return Job.objects.create(owner=alice, slurm_job_id=8001, name="private", state="RUNNING", spec=dict(GOOD_SPEC))


@pytest.mark.parametrize(
    "method, path",
    [
        ("get", "/api/v1/jobs/{id}/"),
        ("get", "/api/v1/jobs/{id}/logs"),
        ("post", "/api/v1/jobs/{id}/cancel"),
        ("post", "/api/v1/jobs/{id}/clone"),
    ],
)
def test_another_user_gets_404_for_every_job_endpoint(alices_job, bob, api_client_for, method, path):
    response = getattr(api_client_for(bob), method)(path.format(id=alices_job.pk), format="json")
    assert response.status_code == 404
    alices_job.refresh_from_db()
    assert alices_job.state == "RUNNING"
    assert Job.objects.count() == 1  # the clone made nothing


def test_the_list_holds_only_the_callers_jobs(alices_job, bob, api_client_for):
    Job.objects.create(owner=bob, slurm_job_id=8002, name="bobs", state="PENDING")
    names = [job["name"] for job in api_client_for(bob).get("/api/v1/jobs/").json()["results"]]
    assert names == ["bobs"]


def test_no_token_or_a_revoked_token_is_refused(alice):
    assert APIClient().get("/api/v1/jobs/").status_code in {401, 403}
    token, key = ApiToken.issue(alice, "gone")
    token.delete()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/jobs/").status_code == 401


def test_create_api_token_prints_a_working_token(alice, capsys):
    call_command("create_api_token", "alice")
    key = capsys.readouterr().out.strip()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/jobs/").status_code == 200
    assert ApiToken.objects.get(user=alice).key_hash != key  # only the hash is stored


def _ready(user, plan="pro"):
    subscribe(user, plan)
    user.profile.cluster_username = user.username
    user.profile.provisioned_at = "2026-01-01T00:00:00Z"
    user.profile.save()


def test_over_quota_is_a_403_with_a_clear_message(alice, api_client_for):
    _ready(alice, "pro")  # pro: 2 a100 at once
    client = api_client_for(alice)
    assert client.post("/api/v1/jobs/", {**GOOD_SPEC, "gpu_count": 2}, format="json").status_code == 201
    response = client.post("/api/v1/jobs/", GOOD_SPEC, format="json")
    assert response.status_code == 403
    assert "quota" in response.json()["detail"].lower() and "a100" in response.json()["detail"]
    assert Job.objects.filter(owner=alice).count() == 1


def test_a_gpu_type_outside_the_plan_is_refused(alice, api_client_for):
    _ready(alice, "free")
    body = {**GOOD_SPEC, "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "gpu_type": "h100"}
    response = api_client_for(alice).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 400
    assert "gpu_type" in response.json()["errors"]


def test_the_free_plan_monthly_hours_are_enforced(alice, api_client_for):
    from django.utils import timezone

    _ready(alice, "free")
    Job.objects.create(
        owner=alice,
        state="COMPLETED",
        end_time=timezone.now(),
        elapsed_seconds=10 * 3600,
        gpu_count=1,
        gpu_type="rtx4090",
    )
    body = {**GOOD_SPEC, "image": "pytorch/pytorch:2.3.0-cuda12.1-cudnn8-runtime", "gpu_type": "rtx4090"}
    response = api_client_for(alice).post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 403
    assert "10 GPU hours" in response.json()["detail"]


# The submit rate limit has its own tests: jobs/tests/test_rate_limit.py.


def test_clone_submits_a_copy_with_overrides(alices_job, alice, api_client_for):
    _ready(alice, "pro")
    Job.objects.filter(pk=alices_job.pk).update(state="COMPLETED")
    response = api_client_for(alice).post(
        f"/api/v1/jobs/{alices_job.pk}/clone", {"time_limit_minutes": 7}, format="json"
    )
    assert response.status_code == 201, response.content
    clone = Job.objects.get(pk=response.json()["id"])
    assert clone.spec["image"] == GOOD_SPEC["image"] and clone.spec["command"] == GOOD_SPEC["command"]
    assert clone.time_limit_minutes == 7


def test_usage_shows_the_callers_aggregates_and_no_nodes(alices_job, alice, api_client_for):
    alices_job.gpu_type, alices_job.quota_gpus = "a100", 1
    alices_job.save()
    body = api_client_for(alice).get("/api/v1/resources/usage").json()
    assert body["gpus_in_use_by_type"] == {"a100": 1}
    assert body["jobs_by_state"] == {"RUNNING": 1}
    assert "node" not in str(body).lower()


def test_the_openapi_schema_lists_the_endpoints(client):
    schema = client.get("/api/schema/").content.decode()
    for path in ["/api/v1/jobs/", "/api/v1/jobs/{id}/logs", "/api/v1/jobs/{id}/cancel", "/api/v1/resources/usage"]:
        assert path in schema


@pytest.fixture
def fresh_log_counts(settings):
    """No log-read count left in Redis by another test of this run."""
    import redis

    store = redis.Redis.from_url(settings.REDIS_URL)
    for key in store.keys("gpupool:rl:logs:*"):
        store.delete(key)


def test_log_reads_are_throttled_per_user(
    alices_job, alice, bob, api_client_for, settings, monkeypatch, fresh_log_counts
):
    from django.test import Client

    monkeypatch.setattr("foundation.ratelimit._clock", lambda: 1_800_000_010.0)  # one minute window
    settings.API_LOG_READS_PER_MINUTE = 3
    client = api_client_for(alice)
    statuses = [client.get(f"/api/v1/jobs/{alices_job.pk}/logs").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = client.get(f"/api/v1/jobs/{alices_job.pk}/logs")
    assert 1 <= int(refused["Retry-After"]) <= 60 and "detail" in refused.json()
    # The downloads count with the API's reads: the same files, the same user.
    browser = Client()
    browser.force_login(alice)
    download = browser.get(f"/jobs/{alices_job.pk}/logs/stdout/download")
    assert download.status_code == 429 and download["Retry-After"]
    # Keyed on the user: another user (from the same address) is not refused.
    Job.objects.create(owner=bob, slurm_job_id=8003, name="bobs", state="RUNNING")
    bobs = Job.objects.get(owner=bob)
    assert api_client_for(bob).get(f"/api/v1/jobs/{bobs.pk}/logs").status_code == 200


def test_usage_costs_the_same_queries_for_one_job_or_many(alice, api_client_for):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    client = api_client_for(alice)

    def queries_for_usage():
        with CaptureQueriesContext(connection) as captured:
            body = client.get("/api/v1/resources/usage").json()
        return len(captured), body

    queries_for_usage()  # the token's first use is recorded (a write the next minute skips)
    Job.objects.create(owner=alice, state="COMPLETED", gpu_type="a100")
    few, _ = queries_for_usage()
    Job.objects.bulk_create(
        Job(owner=alice, state=state, gpu_type="a100") for state in ["COMPLETED", "FAILED", "CANCELLED"] * 50
    )
    many, body = queries_for_usage()
    assert many == few
    assert body["jobs_by_state"] == {"COMPLETED": 51, "FAILED": 50, "CANCELLED": 50}


@pytest.mark.parametrize("scheme", ["Bearer", "bearer", "BEARER"])
def test_the_bearer_scheme_is_case_insensitive(alice, scheme):
    _token, key = ApiToken.issue(alice, "any case")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} {key}")
    assert client.get("/api/v1/jobs/").status_code == 200
    client.credentials(HTTP_AUTHORIZATION=f"{scheme} gpt_not-a-token")
    assert client.get("/api/v1/jobs/").status_code == 401


def test_a_token_records_its_last_use_to_the_minute_without_a_write_per_request(alice):
    from datetime import timedelta

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    token, key = ApiToken.issue(alice, "script")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get("/api/v1/jobs/").status_code == 200
    token.refresh_from_db()
    first_use = token.last_used_at
    assert first_use is not None

    with CaptureQueriesContext(connection) as queries:
        assert client.get("/api/v1/jobs/").status_code == 200
    assert not [q for q in queries.captured_queries if q["sql"].startswith('UPDATE "accounts_apitoken"')]
    token.refresh_from_db()
    assert token.last_used_at == first_use

    ApiToken.objects.filter(pk=token.pk).update(last_used_at=first_use - timedelta(minutes=2))
    assert client.get("/api/v1/jobs/").status_code == 200
    token.refresh_from_db()
    assert token.last_used_at >= first_use
