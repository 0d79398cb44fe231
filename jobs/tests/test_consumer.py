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


def _page(path: str, cookie: str) -> WebsocketCommunicator:
    """A page's socket at `path` (/ws/jobs/ and its query), signed in with `cookie`."""
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1"), (b"cookie", f"sessionid={cookie}".encode())]
    return WebsocketCommunicator(application, path, headers=headers)


async def _connect(cookie: str | None):
    headers = [(b"origin", b"http://127.0.0.1"), (b"host", b"127.0.0.1")]
    if cookie:
        headers.append((b"cookie", f"sessionid={cookie}".encode()))
    communicator = _page("/ws/jobs/", cookie)
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


def test_a_socket_connects_while_the_session_proxy_is_stuck_on_its_database_work(alice, bob, settings):
    """The proxy's decisions wait on a database that does not answer (every proxy thread busy,
    more queued): bob's job socket still connects, its sign-in and connect on a pool of their own.
    On Channels' one shared thread it waited behind them."""
    import asyncio
    import threading

    from channels.testing import HttpCommunicator

    from interactive import access, origins
    from interactive.tests.upstream import session_on

    settings.SESSION_PROXY_DECISION_SECONDS = 0  # each request its own decision
    session = session_on(alice, port=9)
    cookie = f"{origins.SESSION_COOKIE}={origins.cookie_value(session.pk, alice)}".encode()
    bob_cookie = _session_cookie(bob)
    release = threading.Event()

    def stuck_decide(*args, **kwargs):
        release.wait(20)
        return access.decide(*args, **kwargs)

    async def scenario():
        stuck = []
        for _ in range(settings.PROXY_DB_THREADS * 3):
            communicator = HttpCommunicator(
                application,
                "GET",
                f"/api/x{len(stuck)}",
                headers=[(b"host", origins.session_host(session.host_key).encode()), (b"cookie", cookie)],
            )
            stuck.append(asyncio.ensure_future(communicator.get_response(timeout=30)))
        await asyncio.sleep(0.3)
        try:
            socket, connected = await asyncio.wait_for(_connect(bob_cookie), 5)
            await socket.disconnect()
            waiting = sum(not request.done() for request in stuck)
        finally:
            release.set()
        answers = await asyncio.gather(*stuck)
        return connected, waiting, answers

    from interactive import proxy

    real_pooled = proxy._decide_in_database
    proxy._decide_in_database = proxy.PROXY_DB(stuck_decide)
    try:
        connected, waiting, answers = async_to_sync(scenario)()
    finally:
        proxy._decide_in_database = real_pooled
    assert connected
    assert waiting == settings.PROXY_DB_THREADS * 3  # the proxy was still stuck when bob got in
    assert {answer["status"] for answer in answers} == {502}  # then each got its answer (no server at :9)


def test_a_mass_change_is_one_message_for_a_page_that_asks_for_batches_and_one_per_job_otherwise(alice):
    from asgiref.sync import sync_to_async

    from jobs.live.events import publish_job_updates

    jobs = [Job.objects.create(owner=alice, slurm_job_id=6000 + n, state="PENDING", name=f"j{n}") for n in range(3)]
    cookie = _session_cookie(alice)

    async def scenario():
        batched = _page("/ws/jobs/?batches=1", cookie)
        single = _page("/ws/jobs/", cookie)
        assert (await batched.connect())[0] and (await single.connect())[0]
        await sync_to_async(publish_job_updates)([job.pk for job in jobs])
        one = await batched.receive_json_from(timeout=5)
        nothing_more = await batched.receive_nothing(timeout=0.3)
        each = [await single.receive_json_from(timeout=5) for _ in jobs]
        await batched.disconnect()
        await single.disconnect()
        return one, nothing_more, each

    one, nothing_more, each = async_to_sync(scenario)()
    assert one["type"] == "jobs" and sorted(job["slurm_job_id"] for job in one["jobs"]) == [6000, 6001, 6002]
    assert nothing_more
    assert [message["type"] for message in each] == ["job"] * 3
    assert sorted(message["job"]["slurm_job_id"] for message in each) == [6000, 6001, 6002]


def test_a_job_page_hears_its_own_job_alone_and_no_other_users_job(alice, bob):
    from asgiref.sync import sync_to_async

    from jobs.live.events import publish_job_update, publish_job_updates

    mine, other, third = (Job.objects.create(owner=alice, state="PENDING", name=f"j{n}") for n in range(3))
    cookie = _session_cookie(alice)

    async def scenario():
        page = _page(f"/ws/jobs/?batches=1&job={mine.pk}", cookie)
        assert (await page.connect())[0]
        await sync_to_async(publish_job_update)(other.pk)
        await sync_to_async(publish_job_updates)([other.pk, third.pk])
        quiet = await page.receive_nothing(timeout=0.5)
        await sync_to_async(publish_job_updates)([other.pk, mine.pk, third.pk])
        heard = await page.receive_json_from(timeout=5)
        await sync_to_async(publish_job_update)(mine.pk)
        again = await page.receive_json_from(timeout=5)
        await page.disconnect()
        prying = _page(f"/ws/jobs/?job={bobs.pk}", cookie)
        refused = await prying.connect()
        return quiet, heard, again, refused

    bobs = Job.objects.create(owner=bob, state="PENDING", name="bobs")
    quiet, heard, again, refused = async_to_sync(scenario)()
    assert refused == (False, 4404)  # alice's socket may not follow bob's job
    assert quiet  # the other jobs' changes never reached it
    assert heard["type"] == "job" and heard["job"]["id"] == mine.pk
    assert again["job"]["id"] == mine.pk


def test_a_job_page_is_closed_with_the_account(alice):
    from asgiref.sync import sync_to_async

    from jobs.live.events import close_user_sockets

    mine = Job.objects.create(owner=alice, state="PENDING", name="mine")
    cookie = _session_cookie(alice)

    async def scenario():
        page = _page(f"/ws/jobs/?job={mine.pk}", cookie)
        assert (await page.connect())[0]
        await sync_to_async(close_user_sockets)(alice.pk)
        return await page.receive_output(timeout=5)

    assert async_to_sync(scenario)() == {"type": "websocket.close", "code": 4403}
