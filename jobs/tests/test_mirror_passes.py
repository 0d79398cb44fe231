"""What one mirror pass asks slurmrestd for: changed jobs by id, concurrently;
never the full list; pending estimates re-read for watched jobs often, others rarely; a mass
cancel of pending jobs written from the state listing alone, in bulk."""

import threading
from dataclasses import replace
from datetime import timedelta

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.utils import timezone

from cluster.errors import SlurmNotFound
from cluster.records import job_reader
from cluster.records.types import JobStateEntry
from cluster.slurmrest.v0041 import V0041Adapter
from cluster.tests.test_v0041_adapter import captured
from jobs.live.events import publish_job_updates, user_group
from jobs.live.watching import KEY, watch, watched
from jobs.mirror import passes as mirror
from jobs.mirror import rows
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)
TEMPLATE = V0041Adapter().decode_jobs(captured("job_running")[1])[0]


class ListingOnlyClient:
    """A slurmrestd that answers the state listing and single jobs, and counts what it is asked."""

    def __init__(self, jobs):
        self.jobs = {job.job_id: job for job in jobs}
        self.fetched: list[int] = []
        self.threads: set[int] = set()
        self._lock = threading.Lock()

    def list_job_states(self):
        return [JobStateEntry(job_id=job.job_id, states=job.states) for job in self.jobs.values()]

    def list_jobs(self):
        raise AssertionError("the mirror read the full /jobs list")

    def get_job(self, job_id):
        with self._lock:
            self.fetched.append(job_id)
            self.threads.add(threading.get_ident())
        if job_id not in self.jobs:
            raise SlurmNotFound(f"job {job_id}")
        return self.jobs[job_id]

    def get_accounting(self, job_id):
        raise SlurmNotFound(f"job {job_id}")


def _pending(job_id, **changes):
    return replace(TEMPLATE, job_id=job_id, states=("PENDING",), start_time=None, end_time=None, nodes="", **changes)


@pytest.fixture(autouse=True)
def _no_watches():
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).delete(KEY)
    yield
    redis.Redis.from_url(settings.REDIS_URL).delete(KEY)


def test_hundreds_of_new_jobs_are_fetched_by_id_concurrently_never_as_the_full_list(settings):
    settings.MIRROR_FETCH_CONCURRENCY = 8
    client = ListingOnlyClient([_pending(880000 + n) for n in range(400)])
    result = mirror.mirror_jobs(client)
    assert result.changed == 400 and Job.objects.filter(slurm_job_id__gte=880000).count() == 400
    assert sorted(client.fetched) == list(range(880000, 880400))  # each once
    assert len(client.threads) > 1  # concurrently


def test_a_mass_cancel_of_pending_jobs_is_written_from_the_listing_without_fetching():
    jobs = [_pending(881000 + n) for n in range(300)]
    client = ListingOnlyClient(jobs)
    mirror.mirror_jobs(client)
    client.jobs = {job.job_id: replace(job, states=("CANCELLED",)) for job in jobs}
    client.fetched.clear()

    result = mirror.mirror_jobs(client)
    assert client.fetched == []
    assert result.changed == 300
    rows = Job.objects.filter(slurm_job_id__gte=881000, slurm_job_id__lt=881300)
    assert set(rows.values_list("state", flat=True)) == {"CANCELLED"}
    assert rows.filter(end_time__isnull=True).count() == 0
    # The next pass finds nothing to do.
    assert mirror.mirror_jobs(client).changed == 0 and client.fetched == []


def test_a_running_job_that_ends_is_still_fetched_for_its_exit_code():
    running = replace(TEMPLATE, job_id=882000)
    client = ListingOnlyClient([running])
    mirror.mirror_jobs(client)
    client.jobs = {882000: replace(running, states=("FAILED",), exit_code=3, end_time=timezone.now())}
    client.fetched.clear()
    mirror.mirror_jobs(client)
    assert client.fetched == [882000]
    assert Job.objects.get(slurm_job_id=882000).exit_code == 3


def test_watched_pending_jobs_are_refreshed_often_and_the_others_rarely():
    jobs = [_pending(883000 + n) for n in range(20)]
    client = ListingOnlyClient(jobs)
    mirror.mirror_jobs(client)
    a_minute_ago = timezone.now() - timedelta(minutes=1)
    Job.objects.filter(slurm_job_id__gte=883000).update(updated_at=a_minute_ago)
    looked_at = list(Job.objects.filter(slurm_job_id__in=[883003, 883007]).values_list("pk", flat=True))
    watch(looked_at)
    assert set(looked_at) <= watched()
    client.fetched.clear()

    mirror.mirror_jobs(client)
    # A minute old: due for the watched ones only.
    assert sorted(client.fetched) == [883003, 883007]
    client.fetched.clear()
    mirror.mirror_jobs(client)
    assert client.fetched == []  # just refreshed

    # Unwatched and older than the background interval: a few per pass, oldest first.
    Job.objects.filter(slurm_job_id__gte=883000).update(updated_at=timezone.now() - timedelta(hours=1))
    redis_key_cleared = watched()  # still watched; clear them to see the background alone
    assert redis_key_cleared
    import redis
    from django.conf import settings

    redis.Redis.from_url(settings.REDIS_URL).delete(KEY)
    mirror.mirror_jobs(client)
    assert len(client.fetched) == mirror.BACKGROUND_REFRESH_PER_PASS


def test_many_updates_reach_the_owner_in_few_messages(alice, bob):
    jobs = [Job.objects.create(owner=alice, name=f"j{n}", state="PENDING") for n in range(5)]
    Job.objects.create(owner=bob, name="bobs", state="PENDING")
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(user_group(alice.pk), channel)
    publish_job_updates([job.pk for job in jobs])
    message = async_to_sync(layer.receive)(channel)
    assert message["type"] == "jobs.update"
    assert sorted(job["name"] for job in message["jobs"]) == [f"j{n}" for n in range(5)]


def test_an_ended_job_that_slurm_briefly_reports_without_nodes_keeps_them():
    running = replace(TEMPLATE, job_id=884000, nodes="gpu-a100-01")
    assert rows.apply_slurm_job(running)
    ended = replace(running, states=("COMPLETED",), nodes="", gpu_allocation={}, end_time=timezone.now())
    assert rows.apply_slurm_job(ended)
    row = Job.objects.get(slurm_job_id=884000)
    assert row.state == "COMPLETED" and row.nodes == "gpu-a100-01"


def test_new_jobs_are_fetched_by_id_when_squeue_cannot_be_reached(caplog, monkeypatch):
    from cluster.commands.cli import SlurmCli

    monkeypatch.setattr(job_reader.QUEUE_BACKOFF, "unavailable_until", 0.0)
    unreachable = SlurmCli(prefix=["/nonexistent/slurm-login"])
    client = ListingOnlyClient([_pending(884000 + n) for n in range(job_reader.QUEUE_MIN_JOBS)])
    result = mirror.mirror_jobs(client, queue=unreachable)
    assert result.changed == job_reader.QUEUE_MIN_JOBS
    assert sorted(client.fetched) == list(range(884000, 884000 + job_reader.QUEUE_MIN_JOBS))
    assert "squeue could not read" in caplog.text and len(unreachable.executed) == 1
    # Not asked again at the next burst, for a while: a stalled login node costs one timeout.
    client.jobs.update({job.job_id: job for job in (_pending(885000 + n) for n in range(job_reader.QUEUE_MIN_JOBS))})
    mirror.mirror_jobs(client, queue=unreachable)
    assert len(unreachable.executed) == 1
    assert Job.objects.filter(slurm_job_id__gte=885000).count() == job_reader.QUEUE_MIN_JOBS


def test_a_jobs_owner_follows_the_user_slurmrestd_names(alice):
    """A row made from a bulk read names the user squeue printed; when slurmrestd names another
    (a forged or unresolved name), its word stands and the job counts toward that user."""
    alice.profile.cluster_username = "alice7"
    alice.profile.save()
    read = _pending(886000, user_name="4242")
    rows.create_outside_jobs([read])
    assert Job.objects.get(slurm_job_id=886000).owner_id is None
    assert rows.apply_slurm_job(replace(read, user_name="alice7"))
    row = Job.objects.get(slurm_job_id=886000)
    assert (row.cluster_user, row.owner_id) == ("alice7", alice.pk)
