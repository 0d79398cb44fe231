"""Per-user ceilings: API tokens, job templates, and log reads from the job page."""

import pytest
import redis
from django.core.management import call_command
from django.core.management.base import CommandError

from accounts.models import ApiToken, TooManyTokens
from jobs.models import Job, JobTemplate

pytestmark = pytest.mark.django_db


def test_tokens_stop_at_the_ceiling_on_the_page_and_the_command(alice, client, settings):
    settings.MAX_API_TOKENS_PER_USER = 2
    ApiToken.issue(alice, "one")
    ApiToken.issue(alice, "two")
    with pytest.raises(TooManyTokens):
        ApiToken.issue(alice, "three")
    client.force_login(alice)
    page = client.post("/settings/tokens/", {"name": "three"}, follow=True).content.decode()
    assert "the most allowed" in page and "data-new-token" not in page
    with pytest.raises(CommandError, match="the most allowed"):
        call_command("create_api_token", "alice", name="three")
    assert ApiToken.objects.filter(user=alice).count() == 2


def test_templates_stop_at_the_ceiling_but_an_existing_name_is_updated(alice, settings):
    from django.contrib.messages.storage.fallback import FallbackStorage
    from django.test import RequestFactory

    from jobs.views import save_template

    settings.MAX_JOB_TEMPLATES_PER_USER = 2
    # Every account starts with the tutorial's template (credits/tutorial.py): deleted here, it
    # is one of the user's templates like any other.
    JobTemplate.objects.filter(owner=alice).delete()
    request = RequestFactory().post("/jobs/new/")
    request.user = alice
    request.session = {}
    request._messages = FallbackStorage(request)
    for name in ("a", "b", "c"):
        save_template(request, name, {"command": name})
    assert sorted(JobTemplate.objects.filter(owner=alice).values_list("name", flat=True)) == ["a", "b"]
    save_template(request, "a", {"command": "new"})
    assert JobTemplate.objects.get(owner=alice, name="a").spec == {"command": "new"}


def test_only_the_owner_deletes_a_template(alice, bob, client):
    template = JobTemplate.objects.create(owner=alice, name="mine", spec={})
    client.force_login(bob)
    assert client.post(f"/jobs/templates/{template.pk}/delete").status_code == 404
    assert client.get(f"/jobs/templates/{template.pk}/delete").status_code == 405
    client.force_login(alice)
    assert client.post(f"/jobs/templates/{template.pk}/delete").status_code == 302
    assert not JobTemplate.objects.filter(pk=template.pk).exists()


def test_log_reads_from_the_page_are_throttled_per_user(alice, bob, client, settings, monkeypatch):
    monkeypatch.setattr("foundation.ratelimit._clock", lambda: 1_800_000_130.0)
    store = redis.Redis.from_url(settings.REDIS_URL)
    for key in store.scan_iter("gpupool:rl:logs-web:*"):
        store.delete(key)
    settings.API_LOG_READS_PER_MINUTE = 3
    job = Job.objects.create(owner=alice, slurm_job_id=9101, state="RUNNING")
    client.force_login(alice)
    statuses = [client.get(f"/jobs/{job.pk}/logs.json").status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    bobs = Job.objects.create(owner=bob, slurm_job_id=9102, state="RUNNING")
    client.force_login(bob)
    assert client.get(f"/jobs/{bobs.pk}/logs.json").status_code == 200
