"""Events from slurmctld: the signed nudge and the signed batch, their refusals, bursts read
from the listing, and the real hook and forwarder (deploy/slurm-events/, run inside the dev
cluster's root) posting to a real web process."""

import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import threading
import time
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.conf import settings
from django.utils import timezone

from cluster.clusters.services import rest_client, slurm_cli
from jobs.mirror.passes import PASS_TOOK_KEY, mirror_jobs, note_pass_took
from jobs.models import Job
from jobs.slurm_events import asgi as asgi_events
from jobs.slurm_events import receiving as slurm_events
from jobs.slurm_events.asgi import events_app
from testing.servers import BASE_DIR, portal_stack
from testing.slurm import submission, wait_for, wait_until_requeued

SECRET = "test-events-secret-0123456789"
EVENTS_DIR = Path(__file__).resolve().parents[2] / "deploy" / "slurm-events"
HOOK = EVENTS_DIR / "gpupool-slurm-event"
FORWARDER = EVENTS_DIR / "gpupool-event-forwarder"


def _forget_bursts():
    client = slurm_events.redis_client()
    client.delete(slurm_events.BURST_KEY, slurm_events.PASS_GATE, PASS_TOOK_KEY)
    for pattern in (slurm_events.RATE_KEY, slurm_events.OWNER_RATE_KEY, slurm_events.SEEN_KEY):
        for key in client.scan_iter(f"{pattern}*"):
            client.delete(key)


@pytest.fixture
def events_on(settings):
    settings.SLURM_EVENTS_SECRET = SECRET
    _forget_bursts()
    yield settings
    _forget_bursts()


def _batch(lines: list[str], sent_at=None, secret=SECRET):
    body = "".join(f"{line}\n" for line in lines).encode()
    header = f"n={len(lines)};sha256={hashlib.sha256(body).hexdigest()};t={int(sent_at or time.time())}"
    return header, slurm_events.sign(secret, header), body


def _signed(job_id, state="CANCELLED", hook="jobcomp", sent_at=None):
    line = f"job={job_id};state={state};hook={hook};t={int(sent_at or time.time())}"
    return line, slurm_events.sign(SECRET, line)


def test_a_signed_event_is_read_and_every_bad_one_refused(events_on):
    line, signature = _signed(42, "RUNNING", "prolog_slurmctld")
    event = slurm_events.verify(line, signature)
    assert (event.job_id, event.state, event.hook) == (42, "RUNNING", "prolog_slurmctld")
    refusals = [
        (None, None, 401),
        (line, "0" * 64, 401),
        (line.replace("job=42", "job=43"), signature, 401),  # the line is what is signed
        (*_signed(42, sent_at=time.time() - 3600), 401),  # stale
        ("job=42;rm -rf /", slurm_events.sign(SECRET, "job=42;rm -rf /"), 400),
    ]
    for bad_line, bad_signature, status in refusals:
        with pytest.raises(slurm_events.EventRefused) as refused:
            slurm_events.verify(bad_line, bad_signature)
        assert refused.value.status == status, bad_line


def test_events_are_off_without_a_secret(settings):
    settings.SLURM_EVENTS_SECRET = ""
    with pytest.raises(slurm_events.EventRefused) as refused:
        slurm_events.verify(*_signed(1))
    assert refused.value.status == 404


async def _post(headers, body=b""):
    communicator = HttpCommunicator(events_app, "POST", "/api/v1/slurm/events", body=body, headers=headers)
    return await communicator.get_response()


def test_a_signed_batch_is_read_and_every_bad_one_refused(events_on):
    header, signature, body = _batch(
        ["job=42;state=RUNNING;hook=prolog_slurmctld", "job=43;state=CANCELLED;hook=jobcomp;ended=1764547199"]
    )
    events = slurm_events.read_batch(slurm_events.verify_batch(header, signature), body)
    assert [(e.job_id, e.state, e.hook, e.ended_at) for e in events] == [
        (42, "RUNNING", "prolog_slurmctld", None),
        (43, "CANCELLED", "jobcomp", 1764547199),
    ]
    header_refusals = [
        (None, None, 401),
        (header, "0" * 64, 401),
        (header.replace("n=2", "n=3"), signature, 401),  # the count is signed
        (_batch(["job=1;state=X;hook=y"], sent_at=time.time() - 3600)[:2], None, 401),  # stale
        ("n=5000;sha256=" + "0" * 64 + f";t={int(time.time())}", None, 400),  # too many
        ("n=1;rm -rf /", None, 400),
    ]
    for bad_header, bad_signature, status in header_refusals:
        if isinstance(bad_header, tuple):
            bad_header, bad_signature = bad_header
        elif bad_signature is None and bad_header:
            bad_signature = slurm_events.sign(SECRET, bad_header)
        with pytest.raises(slurm_events.EventRefused) as refused:
            slurm_events.verify_batch(bad_header, bad_signature)
        assert refused.value.status == status, bad_header
    batch = slurm_events.verify_batch(header, signature)
    for bad_body in (
        body.replace(b"job=42", b"job=44"),  # not the body signed for
        body + b"job=45;state=RUNNING;hook=prolog_slurmctld\n",
    ):
        with pytest.raises(slurm_events.EventRefused) as refused:
            slurm_events.read_batch(batch, bad_body)
        assert refused.value.status == 400
    # Signed as sent, but not events: a count that does not match, a line with a shell in it.
    for lines_sent in (["job=42;state=RUNNING;hook=prolog_slurmctld\njob=43;state=A;hook=b"], ["job=42;$(reboot)"]):
        header, signature, body = _batch(lines_sent)
        with pytest.raises(slurm_events.EventRefused) as refused:
            slurm_events.read_batch(slurm_events.verify_batch(header, signature), body)
        assert refused.value.status == 400
    # The body's bound fits the longest lines the grammar takes.
    longest = f"job={'9' * 19};state={'A' * 32};hook={'a' * 32};ended={'1' * 12};task={'9' * 19}_{'9' * 10}"
    header, signature, body = _batch([longest] * 3)
    batch = slurm_events.verify_batch(header, signature)
    assert len(body) == batch.max_bytes and len(slurm_events.read_batch(batch, body)) == 3


def test_jobs_a_drain_could_not_write_stay_dirty_for_the_next(events_on, monkeypatch):
    """A deadlock with a pass writing the same array (or a database restart) fails the drain's
    writes: its jobs go back in the dirty set, not lost until the next polling pass."""
    from django.db import OperationalError

    client = slurm_events.redis_client()
    client.delete(slurm_events.DIRTY_KEY)
    client.sadd(slurm_events.DIRTY_KEY, 701, 702)

    def deadlocked(job_ids):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(slurm_events, "refresh_jobs", deadlocked)
    with pytest.raises(OperationalError):
        slurm_events.drain()
    assert {int(member) for member in client.smembers(slurm_events.DIRTY_KEY)} == {701, 702}
    client.delete(slurm_events.DIRTY_KEY)


def test_a_burst_is_many_events_at_once_or_late_ones(events_on):
    client = slurm_events.redis_client()
    now = time.time()

    def event(job_id, ended_at=None):
        return slurm_events.SlurmEvent(job_id, "CANCELLED", "jobcomp", int(now), ended_at)

    assert not slurm_events.note_burst(client, [event(1), event(2)], now=now)
    assert not slurm_events.note_burst(client, [event(3, ended_at=int(now))], now=now + 0.01)
    # Enough in this window and the last: slurmctld's completion scripts are queueing up.
    assert slurm_events.note_burst(client, [event(i) for i in range(10, 15)], now=now + 0.02)
    _forget_bursts()
    # One event, but its job ended seconds before it reached us: the hook's queue is behind.
    assert slurm_events.note_burst(client, [event(4, ended_at=int(now) - 5)], now=now)
    assert client.pttl(slurm_events.BURST_KEY) > 0


@pytest.mark.django_db
def test_during_one_users_burst_another_users_few_jobs_are_read_by_id(events_on, alice, bob):
    """A mass change is one user's: the owner with BURST_EVENTS or more events in the window is
    left to the listing passes; another user's few jobs are bystanders, read by id at once."""
    base = 9_000_000
    for offset in range(10):
        Job.objects.create(owner=alice, cluster_user="alicex", state="PENDING", slurm_job_id=base + offset)
    Job.objects.create(owner=bob, cluster_user="bobx", state="PENDING", slurm_job_id=base + 100)
    client = slurm_events.redis_client()
    now = time.time()
    ids = {base + offset for offset in range(10)} | {base + 100}
    assert slurm_events._bystanders(client, ids, now=now) == {base + 100}
    # Next window: alice's burst is still counted from the last one; bob's one more job is not.
    later = now + slurm_events.RATE_WINDOW_SECONDS
    assert slurm_events._bystanders(client, {base, base + 100}, now=later) == {base + 100}
    # Unknown to the portal (no row, no owner): left to the listing.
    assert slurm_events._bystanders(client, {base + 555}, now=later) == set()


@pytest.mark.django_db
def test_a_completion_is_written_at_once_and_only_what_ran_is_read_again(events_on, alice, bob, monkeypatch):
    """A pending job's cancel is all in its event: written whole (Slurm's signature too, so the
    next listing reads nothing) and never read by id. A job that ran gets its state and end at
    once and an empty signature, so its exit code is still read from Slurm. Starts, requeues
    (a completion with state PENDING) and finished rows are not touched."""
    read = []
    monkeypatch.setattr(slurm_events, "refresh_jobs", lambda ids: read.extend(ids) or 0)
    started = timezone.now() - timedelta(minutes=5)
    pending = Job.objects.create(owner=alice, cluster_user="alicex", state="PENDING", slurm_job_id=9_100_001)
    ran, requeued = (
        Job.objects.create(
            owner=bob,
            cluster_user="bobx",
            state="RUNNING",
            slurm_states="RUNNING",
            start_time=started,
            slurm_job_id=job_id,
        )
        for job_id in (9_100_002, 9_100_004)
    )
    done = Job.objects.create(owner=bob, cluster_user="bobx", state="COMPLETED", slurm_job_id=9_100_003)
    failed_pending = Job.objects.create(owner=alice, cluster_user="alicex", state="PENDING", slurm_job_id=9_100_005)
    ended = int(time.time()) - 1
    events = [
        slurm_events.SlurmEvent(9_100_001, "CANCELLED", "jobcomp", ended + 1, ended_at=ended),
        slurm_events.SlurmEvent(9_100_002, "COMPLETED", "jobcomp", ended + 1, ended_at=ended),
        slurm_events.SlurmEvent(9_100_003, "CANCELLED", "jobcomp", ended + 1, ended_at=ended),
        slurm_events.SlurmEvent(9_100_004, "PENDING", "jobcomp", ended + 1, ended_at=ended),
        slurm_events.SlurmEvent(9_100_005, "FAILED", "jobcomp", ended + 1, ended_at=ended),
    ]
    assert slurm_events.accept_many([]) == 0
    assert slurm_events.accept_many(events) == 3
    pending.refresh_from_db()
    assert (pending.state, pending.slurm_states, pending.end_time.timestamp()) == ("CANCELLED", "CANCELLED", ended)
    ran.refresh_from_db()
    assert (ran.state, ran.slurm_states, ran.end_time.timestamp()) == ("COMPLETED", "", ended)
    failed_pending.refresh_from_db()
    assert (failed_pending.state, failed_pending.slurm_states) == ("FAILED", "")
    done.refresh_from_db()
    assert done.state == "COMPLETED" and done.end_time is None
    requeued.refresh_from_db()
    assert requeued.state == "RUNNING" and requeued.end_time is None
    # Read from Slurm: what ran, the requeue, the failure; never the settled cancel.
    assert 9_100_001 not in read and {9_100_002, 9_100_004, 9_100_005} <= set(read)


def test_the_endpoint_refuses_bodies_and_bad_signatures_before_doing_anything(events_on, monkeypatch):
    taken = []
    monkeypatch.setattr(
        "jobs.slurm_events.asgi.mark", lambda events: taken.extend(events) or slurm_events.Taken([], set())
    )
    monkeypatch.setattr("jobs.slurm_events.asgi.after_taken", lambda taken: 0)
    line, signature = _signed(7)
    signature_one = signature.encode()
    with_body = async_to_sync(_post)(
        [(b"x-gpupool-event", line.encode()), (b"x-gpupool-signature", signature.encode()), (b"content-length", b"5")],
        b"hello",
    )
    assert with_body["status"] == 413
    forged = async_to_sync(_post)([(b"x-gpupool-event", line.encode()), (b"x-gpupool-signature", b"f" * 64)])
    assert forged["status"] == 401
    assert taken == []
    good = async_to_sync(_post)([(b"x-gpupool-event", line.encode()), (b"x-gpupool-signature", signature.encode())])
    assert good["status"] == 202 and [event.job_id for event in taken] == [7]

    header, signature, body = _batch([f"job={job_id};state=CANCELLED;hook=jobcomp" for job_id in (8, 9)])
    signed = [(b"x-gpupool-events", header.encode()), (b"x-gpupool-signature", signature.encode())]
    too_long = async_to_sync(_post)([*signed, (b"content-length", b"100000")], body)
    assert too_long["status"] == 413  # more than two events can take: refused unread
    undeclared = async_to_sync(_post)(signed, body)
    assert undeclared["status"] == 411
    forged = async_to_sync(_post)(
        [(b"x-gpupool-events", header.encode()), (b"x-gpupool-signature", b"f" * 64), (b"content-length", b"9")], body
    )
    assert forged["status"] == 401
    assert [event.job_id for event in taken] == [7]
    batch = async_to_sync(_post)([*signed, (b"content-length", str(len(body)).encode())], body)
    assert batch["status"] == 202 and [event.job_id for event in taken] == [7, 8, 9]
    # The same signed lines sent again within their window (caught on the wire): answered, not taken.
    again = async_to_sync(_post)([*signed, (b"content-length", str(len(body)).encode())], body)
    single = async_to_sync(_post)([(b"x-gpupool-event", line.encode()), (b"x-gpupool-signature", signature_one)])
    assert again["status"] == single["status"] == 202 and [event.job_id for event in taken] == [7, 8, 9]
    assert json.loads(again["body"])["replay"] is True


def test_a_small_batch_is_answered_while_large_ones_are_written_one_at_a_time(events_on, monkeypatch):
    release = threading.Event()
    running, most, order = [0], [0], []
    lock = threading.Lock()

    def mark(events):
        large = len(events) > asgi_events.SMALL_BATCH
        with lock:
            running[0] += large
            most[0] = max(most[0], running[0])
        if large:
            release.wait(10)  # a mass change's batch, long in the writing
        with lock:
            running[0] -= large
            order.append(events[0].job_id)
        return slurm_events.Taken([], set())

    monkeypatch.setattr("jobs.slurm_events.asgi.mark", mark)
    monkeypatch.setattr("jobs.slurm_events.asgi.after_taken", lambda taken: 0)

    def posted(first_job, count):
        header, signature, body = _batch([f"job={first_job + n};state=CANCELLED;hook=jobcomp" for n in range(count)])
        headers = [
            (b"x-gpupool-events", header.encode()),
            (b"x-gpupool-signature", signature.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        return _post(headers, body)

    async def scenario():
        # More large batches waiting than any shared thread pool has threads (32 at most).
        firsts = range(1000, 41000, 1000)
        large = [asyncio.create_task(posted(first, asgi_events.SMALL_BATCH + 1)) for first in firsts]
        await asyncio.sleep(0.3)
        small = await asyncio.wait_for(posted(9, 1), 5)  # answered while every large one waits
        assert small["status"] == 202 and order == [9]
        release.set()
        return [response["status"] for response in await asyncio.gather(*large)], list(firsts)

    statuses, firsts = async_to_sync(scenario)()
    assert statuses == [202] * len(firsts)
    assert most[0] == 1 and sorted(order[1:]) == firsts


@pytest.fixture
def held_job(provision, alice, django_db_blocker):
    with django_db_blocker.unblock():
        profile = provision(alice)
    client = rest_client(profile.cluster_username)
    for _ in range(3):
        job_id = client.submit_job(submission("sleep 30", tres_per_node="gres/gpu:rtx4090:1"))
        # Held at once, to stay pending; Slurm may have started it in the submit call itself.
        slurm_cli().run("scontrol", "hold", str(job_id), check=False)
        if client.get_job(job_id).state == "PENDING":
            break
        client.cancel_job(job_id)
    else:
        pytest.fail("could not get a pending job")
    yield client, job_id
    try:
        client.cancel_job(job_id)
    except Exception:
        pass


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_an_event_writes_the_cancel_of_a_pending_job_at_once(events_on, held_job):
    client, job_id = held_job
    wait_for(lambda: mirror_jobs(rest_client()) and Job.objects.filter(slurm_job_id=job_id, state="PENDING").exists())
    client.cancel_job(job_id)
    written = slurm_events.accept(slurm_events.verify(*_signed(job_id)))
    assert written == 1
    assert Job.objects.get(slurm_job_id=job_id).state == "CANCELLED"


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_late_event_has_the_listing_read_rather_than_its_job(events_on, held_job, monkeypatch):
    """An event that reaches the portal seconds after its job ended (completion scripts run as
    programs queue up behind a mass change) starts a listing pass: the job of the user whose
    burst it is (here one event is a burst) is written from the listing, with no fetch by id,
    when a pass costs less than reading the job by id (here: always)."""
    monkeypatch.setattr(slurm_events, "BURST_EVENTS", 1)
    monkeypatch.setattr(slurm_events, "BY_ID_READ_SECONDS", 3600)
    client, job_id = held_job
    wait_for(lambda: mirror_jobs(rest_client()) and Job.objects.filter(slurm_job_id=job_id, state="PENDING").exists())
    client.cancel_job(job_id)
    now = time.time()
    fetched = []
    original_fetch = slurm_events.fetch_jobs
    monkeypatch.setattr(
        slurm_events, "fetch_jobs", lambda slurm, ids: fetched.extend(ids) or original_fetch(slurm, ids)
    )
    # An epilog's event tells no state (a completion's would be written at once, nothing read).
    written = slurm_events.accept_many(
        [slurm_events.SlurmEvent(job_id, "ENDED", "epilog_slurmctld", int(now), ended_at=int(now) - 10)], now=now
    )
    assert written >= 1 and fetched == []
    assert Job.objects.get(slurm_job_id=job_id).state == "CANCELLED"


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_bursts_few_jobs_are_read_by_id_when_a_pass_costs_more(events_on, held_job, monkeypatch):
    """The same late event, when the last pass took long (a cluster holding a 10,000-task sweep:
    seconds): its one job is read by id at once, and no listing pass is started."""
    monkeypatch.setattr(slurm_events, "BURST_EVENTS", 1)
    client, job_id = held_job
    wait_for(lambda: mirror_jobs(rest_client()) and Job.objects.filter(slurm_job_id=job_id, state="PENDING").exists())
    client.cancel_job(job_id)
    note_pass_took(2.0)
    now = time.time()
    fetched, passes = [], []
    original_fetch = slurm_events.fetch_jobs
    monkeypatch.setattr(
        slurm_events, "fetch_jobs", lambda slurm, ids: fetched.extend(ids) or original_fetch(slurm, ids)
    )
    monkeypatch.setattr(slurm_events, "_listing_pass", lambda *args: passes.append(args) or 0)
    written = slurm_events.accept_many(
        [slurm_events.SlurmEvent(job_id, "ENDED", "epilog_slurmctld", int(now), ended_at=int(now) - 10)], now=now
    )
    assert written == 1 and fetched == [job_id] and passes == []
    assert Job.objects.get(slurm_job_id=job_id).state == "CANCELLED"


def _in_root(*command, env: dict):
    return [*settings.SLURM_CLI_PREFIX, "env", "-i", *(f"{k}={v}" for k, v in env.items()), *command]


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_the_hook_and_the_forwarder_in_the_slurm_root_reach_the_portal(held_job):
    """The hook as slurmctld runs it (dash inside the root) leaves a file named for the event;
    the forwarder (Perl core modules only, inside the root) posts it to the web process as a signed batch
    and deletes it: the job's cancel shows without any mirror pass."""
    client, job_id = held_job
    wait_for(lambda: mirror_jobs(rest_client()) and Job.objects.filter(slurm_job_id=job_id, state="PENDING").exists())
    root = Path(settings.DEVCLUSTER_DIR) / "root"
    name = f"gpupool-event-test-{job_id}"
    spool = root / "tmp" / f"{name}.spool"
    spool.mkdir(mode=0o700)
    forwarder = None
    with portal_stack(extra_env={"SLURM_EVENTS_SECRET": SECRET}) as base_url:
        shutil.copy(HOOK, root / "tmp" / f"{name}.hook")
        shutil.copy(FORWARDER, root / "tmp" / f"{name}.forwarder")
        (root / "tmp" / f"{name}.conf").write_text(
            f"url={base_url}/api/v1/slurm/events\nsecret={SECRET}\nspool=/tmp/{name}.spool\n"
        )
        try:
            client.cancel_job(job_id)
            hook_env = {
                "JOBID": job_id,
                "JOBSTATE": "CANCELLED",
                "END": "1764547199",
                "UID": "1001",
                "GPUPOOL_EVENTS_SPOOL": f"/tmp/{spool.name}",
            }
            ran = subprocess.run(
                _in_root("/bin/sh", f"/tmp/{name}.hook", env=hook_env), capture_output=True, timeout=10
            )
            assert ran.returncode == 0, ran.stderr
            assert [path.name for path in spool.iterdir()] == [f"{job_id}.CANCELLED.jobcomp.1764547199.u1001"]
            # What no event is: nothing is left (a job id with a shell in it).
            bad = subprocess.run(
                _in_root("/bin/sh", f"/tmp/{name}.hook", env={**hook_env, "JOBID": "1;reboot"}), timeout=10
            )
            assert bad.returncode == 0 and len(list(spool.iterdir())) == 1
            forwarder = subprocess.Popen(
                _in_root("/usr/bin/perl", f"/tmp/{name}.forwarder", env={"GPUPOOL_EVENTS_CONF": f"/tmp/{name}.conf"}),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            wait_for(
                lambda: Job.objects.filter(slurm_job_id=job_id, state="CANCELLED").exists(),
                timeout=5,
                interval=0.05,
                what="the forwarded event's write",
            )
            # Sent, then deleted: nothing left in the spool or among the files being sent.
            wait_for(
                lambda: sorted(os.listdir(spool)) == [".sending"] and not os.listdir(spool / ".sending"), timeout=5
            )
        finally:
            if forwarder is not None:
                os.killpg(forwarder.pid, signal.SIGTERM)
                forwarder.wait(timeout=10)
            for suffix in ("hook", "forwarder", "conf"):
                (root / "tmp" / f"{name}.{suffix}").unlink(missing_ok=True)
            shutil.rmtree(spool, ignore_errors=True)


def _write_like(path: Path, text: str) -> None:
    """Replace `path` at once (the sender never reads half a file), keeping its mode and owner."""
    stat = path.stat()
    temporary = path.with_name(path.name + ".test")
    temporary.write_text(text)
    os.chmod(temporary, stat.st_mode & 0o7777)
    os.chown(temporary, stat.st_uid, stat.st_gid)
    os.replace(temporary, path)


@contextmanager
def _events_sent_to(url: str):
    """Point the dev cluster's sender at `url` for the block: it reads its config at every
    event, so slurmctld's own hooks post to this test's portal (and the dev portal's events
    wait for the polling mirror meanwhile; `cluster.sh up` writes the config again)."""
    conf = Path(settings.DEVCLUSTER_DIR) / "root" / "etc" / "slurm" / "gpupool-events.conf"
    original = conf.read_text()
    secret = next(line.split("=", 1)[1].strip() for line in original.splitlines() if line.startswith("secret="))
    _write_like(conf, f"url={url}\nsecret={secret}\n")
    try:
        yield secret
    finally:
        _write_like(conf, original)


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_slurmctlds_own_hooks_move_the_row_without_a_mirror_pass(held_job):
    """Release, requeue and cancel a job in slurmctld: with the web process alone (no worker, no beat,
    so no mirror pass), each change reaches the row through the hooks slurmctld runs itself
    (the start from slurmd's Prolog on the job's node, jobcomp/lua for every end and the requeue)."""
    client, job_id = held_job
    mirror_jobs(rest_client())
    assert Job.objects.get(slurm_job_id=job_id).state == "PENDING"

    def shows(*states):
        try:
            return wait_for(
                lambda: Job.objects.filter(slurm_job_id=job_id, state__in=states).first(),
                timeout=15,  # a loaded cluster may take seconds to start the job; the event is at once
                interval=0.05,
                what=f"an event to write {states}",
            )
        except AssertionError as timed_out:
            # What Slurm says now and which events the portal took: a lost event or none sent.
            web_log = BASE_DIR / "var" / "test-logs" / f"web-{base_url.rsplit(':', 1)[1]}.log"
            taken = [line for line in web_log.read_text().splitlines() if "Slurm events:" in line]
            raise AssertionError(
                f"{timed_out}; Slurm says {client.get_job(job_id).states}; events taken: {taken}"
            ) from None

    with portal_stack() as base_url, _events_sent_to(f"{base_url}/api/v1/slurm/events") as secret:
        assert secret
        slurm_cli().run("scontrol", "release", str(job_id))
        assert shows("RUNNING").nodes.startswith("gpu-4090-")
        slurm_cli().requeue_job(job_id)
        # Back in the queue (the requeue's completion is told while the run completes: "PENDING,COMPLETING";
        # the flag goes with the next mirror pass, no event marks it).
        assert shows("PENDING").slurm_states.startswith("PENDING")
        # What Slurm promises: jobcomp runs when a pending job is cancelled, but the requeue
        # has already logged this run's completion, and a job cancelled while that run still
        # completes becomes "CANCELLED,COMPLETING" and then "CANCELLED" with no hook at all
        # (slurmctld's _job_signal and cleanup_completing log no completion): only the polling
        # mirror sees that end. So the cancel waits until the requeued job is plainly pending.
        wait_until_requeued(client, job_id)
        client.cancel_job(job_id)
        assert shows("CANCELLED").end_time is not None


def test_a_line_not_taken_is_taken_on_its_senders_retry(events_on, monkeypatch):
    """The replay guard remembers a line only once its events were taken."""
    taken, failing = [], [True]

    def mark(events):
        if failing.pop() if failing else False:
            raise ConnectionError("the database went away")
        taken.extend(events)
        return slurm_events.Taken([], set())

    monkeypatch.setattr("jobs.slurm_events.asgi.mark", mark)
    monkeypatch.setattr("jobs.slurm_events.asgi.after_taken", lambda taken: 0)
    line, signature = _signed(11)
    headers = [(b"x-gpupool-event", line.encode()), (b"x-gpupool-signature", signature.encode())]
    assert async_to_sync(_post)(headers)["status"] == 503 and taken == []
    assert async_to_sync(_post)(headers)["status"] == 202 and [event.job_id for event in taken] == [11]
    assert json.loads(async_to_sync(_post)(headers)["body"])["replay"] is True and len(taken) == 1
