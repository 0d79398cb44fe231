"""The job socket: session-authenticated, and a socket only hears its own user's jobs."""

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator
from django.test import Client

from gpupool.asgi import application
from jobs.live.events import publish_job_update
from jobs.models import Job

pytestmark = pytest.mark.django_db(transaction=True)


def _session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


async def _connect(cookie: str | None):
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = WebsocketCommunicator(application, "/ws/jobs/", headers=headers)
    connected, _ = await communicator.connect()
    return communicator, connected


def test_anonymous_socket_is_refused():
    async def scenario():
        communicator, connected = await _connect(None)
        await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is False


def test_each_socket_receives_only_its_users_jobs(alice, bob):
    alice_job = Job.objects.create(owner=alice, slurm_job_id=5001, state="RUNNING", name="a-job")
    bob_job = Job.objects.create(owner=bob, slurm_job_id=5002, state="RUNNING", name="b-job")
    alice_cookie = _session_cookie(alice)

    async def scenario():
        communicator, connected = await _connect(alice_cookie)
        assert connected
        from asgiref.sync import sync_to_async

        await sync_to_async(publish_job_update)(bob_job.pk)
        await sync_to_async(publish_job_update)(alice_job.pk)
        message = await communicator.receive_json_from(timeout=5)
        nothing_else = await communicator.receive_nothing(timeout=0.5)
        await communicator.disconnect()
        return message, nothing_else

    message, nothing_else = async_to_sync(scenario)()
    assert message["job"]["slurm_job_id"] == 5001 and message["job"]["state"] == "RUNNING"
    assert nothing_else
