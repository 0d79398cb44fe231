"""The submit rate limit: per user (a proxy's one address is shared by everyone behind it),
looser per address, and only submissions that pass validation and quota use it up."""

import pytest
import redis

from conftest import subscribe
from jobs.models import Job
from jobs.tests.conftest import GOOD_SPEC

pytestmark = pytest.mark.django_db
VALID = {**GOOD_SPEC, "gpu_type": "rtx4090"}
INVALID = {**GOOD_SPEC, "image": "nvcr.io/nvidia/pytorch:latest"}  # `latest` is never accepted


@pytest.fixture(autouse=True)
def _fixed_window(monkeypatch, settings):
    # One fixed moment: a minute boundary falling between the posts would reset the window.
    monkeypatch.setattr("foundation.ratelimit._clock", lambda: 1_800_000_070.0)
    store = redis.Redis.from_url(settings.REDIS_URL)
    for key in store.scan_iter("gpupool:rl:*"):
        store.delete(key)
    settings.SUBMIT_RATE_LIMIT_PER_MINUTE = 5
    settings.SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE = 30


def _ready(user, plan="enterprise"):
    subscribe(user, plan)
    profile = user.profile
    profile.cluster_username, profile.provisioned_at = user.username, "2026-01-01T00:00:00Z"
    profile.save()
    return user


def _post(client, body, address="192.0.2.10"):
    return client.post("/api/v1/jobs/", body, format="json", REMOTE_ADDR=address).status_code


def test_invalid_submissions_do_not_count(alice, api_client_for):
    client = api_client_for(_ready(alice))
    assert [_post(client, INVALID) for _ in range(8)] == [400] * 8
    assert [_post(client, VALID) for _ in range(4)] == [201] * 4  # enterprise: 4 rtx4090 at once
    assert Job.objects.filter(owner=alice).count() == 4


def test_quota_refusals_give_their_count_back(alice, api_client_for, settings):
    settings.SUBMIT_RATE_LIMIT_PER_MINUTE = 3
    client = api_client_for(_ready(alice, "pro"))  # pro: 2 a100 at once
    statuses = [_post(client, {**GOOD_SPEC, "gpu_count": 2}) for _ in range(4)]
    assert statuses == [201, 403, 403, 403]
    Job.objects.filter(owner=alice).update(state="COMPLETED")
    assert [_post(client, {**GOOD_SPEC, "gpu_count": 1}) for _ in range(3)] == [201, 201, 429]


def test_the_limit_follows_the_user_across_addresses(alice, api_client_for, settings):
    settings.SUBMIT_RATE_LIMIT_PER_MINUTE = 2
    client = api_client_for(_ready(alice))
    statuses = [_post(client, VALID, address=f"192.0.2.{20 + n}") for n in range(3)]
    assert statuses == [201, 201, 429]


def test_users_behind_one_proxy_address_each_have_their_own_limit(alice, bob, api_client_for, settings):
    settings.SUBMIT_RATE_LIMIT_PER_MINUTE = 2
    alice_client, bob_client = api_client_for(_ready(alice)), api_client_for(_ready(bob))
    assert [_post(alice_client, VALID) for _ in range(3)] == [201, 201, 429]
    assert [_post(bob_client, VALID) for _ in range(2)] == [201, 201]


def test_one_address_has_a_ceiling_over_all_its_users(alice, bob, api_client_for, settings):
    settings.SUBMIT_RATE_LIMIT_PER_IP_PER_MINUTE = 3
    alice_client, bob_client = api_client_for(_ready(alice)), api_client_for(_ready(bob))
    assert [_post(alice_client, VALID) for _ in range(2)] == [201, 201]
    response = bob_client.post("/api/v1/jobs/", VALID, format="json", REMOTE_ADDR="192.0.2.10")
    assert response.status_code == 201
    refused = bob_client.post("/api/v1/jobs/", VALID, format="json", REMOTE_ADDR="192.0.2.10")
    assert refused.status_code == 429 and 1 <= int(refused["Retry-After"]) <= 60
    # The refused request did not use up bob's own allowance elsewhere.
    assert _post(bob_client, VALID, address="192.0.2.99") == 201
