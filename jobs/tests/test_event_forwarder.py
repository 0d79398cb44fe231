"""The event forwarder (deploy/slurm-events/gpupool-event-forwarder) as a program: run with the
host's Perl against a receiver in this process that checks every batch with the portal's own
verification (jobs/slurm_events/receiving.py) and answers as told. What it must do: post several
batches at once (a batch the portal is still writing never holds a later event), keep one
user's mass change from holding another user's events (the express lane), put a refused
batch back in the spool and send it again, and send what a killed forwarder left mid-batch.
The forwarder inside the dev cluster's root, posting to a real web process, is in test_slurm_events.py."""

import os
import signal
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from jobs.slurm_events import receiving as slurm_events
from testing.slurm import wait_for

SECRET = "test-forwarder-secret-0123456789"
FORWARDER = Path(__file__).resolve().parents[2] / "deploy" / "slurm-events" / "gpupool-event-forwarder"


class Receiver(ThreadingHTTPServer):
    """Takes signed batches; `hold` makes the next batch wait for `release`, `refuse` answers the
    next one 503. Records every batch's job ids, in the order they arrived."""

    daemon_threads = True

    def __init__(self):
        super().__init__(("127.0.0.1", 0), _Handler)
        self.batches: list[list[int]] = []
        self.events: list = []
        self.open_requests = 0
        self.holding = False
        self.hold_next = False
        # Every batch with a job id in this set waits for `release` (a mass change's batches).
        self.hold_jobs: set[int] = set()
        self.held = 0
        self.refuse_next = False
        self.release = threading.Event()
        self.lock = threading.Lock()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.server_address[1]}/api/v1/slurm/events"

    def jobs_taken(self) -> set[int]:
        with self.lock:
            return {job for batch in self.batches for job in batch}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        server: Receiver = self.server
        line = self.headers["X-Gpupool-Events"]
        batch = slurm_events.verify_batch(line, self.headers["X-Gpupool-Signature"])
        events = slurm_events.read_batch(batch, self.rfile.read(int(self.headers["Content-Length"])))
        with server.lock:
            server.batches.append([event.job_id for event in events])
            server.events += events
            server.open_requests += 1
            hold, server.hold_next = server.hold_next, False
            hold = hold or bool(server.hold_jobs.intersection(server.batches[-1]))
            refuse, server.refuse_next = server.refuse_next, False
            server.held += hold
        try:
            if hold:
                server.holding = True
                server.release.wait(timeout=20)
                server.holding = False
            self.send_response(503 if refuse else 202)
            self.send_header("Content-Length", "0")
            self.end_headers()
        finally:
            with server.lock:
                server.open_requests -= 1


@pytest.fixture
def receiver(settings):
    settings.SLURM_EVENTS_SECRET = SECRET
    server = Receiver()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.release.set()
    server.shutdown()
    server.server_close()


@pytest.fixture
def forwarder_for(tmp_path):
    started = []

    def start(url: str) -> Path:
        spool = tmp_path / "spool"
        spool.mkdir(mode=0o700, exist_ok=True)
        conf = tmp_path / "events.conf"
        conf.write_text(f"url={url}\nsecret={SECRET}\nspool={spool}\n")
        conf.chmod(0o600)
        process = subprocess.Popen(
            ["perl", str(FORWARDER)],
            env={"PATH": os.environ["PATH"], "GPUPOOL_EVENTS_CONF": str(conf)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        started.append(process)
        return spool

    start.started = started
    yield start
    for process in started:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


def _event(spool: Path, job_id: int, state="CANCELLED", ended=1764547199, uid: int | None = None):
    (spool / f"{job_id}.{state}.jobcomp.{ended}{'' if uid is None else f'.u{uid}'}").touch()


def _spool_empty(spool: Path) -> bool:
    return [p.name for p in spool.iterdir()] == [".sending"] and not any((spool / ".sending").iterdir())


def test_a_batch_being_written_never_holds_the_next_event(receiver, forwarder_for):
    receiver.hold_next = True
    spool = forwarder_for(receiver.url)
    for job_id in range(100, 400):
        _event(spool, job_id)
    wait_for(lambda: receiver.holding, timeout=10, interval=0.02, what="the first batch, held")
    # Another user's job ends while the portal is still writing that batch.
    _event(spool, 9001)
    wait_for(lambda: 9001 in receiver.jobs_taken(), timeout=5, interval=0.02, what="the later event")
    assert receiver.holding, "the first batch was answered before the later event was sent"
    receiver.release.set()
    wait_for(lambda: _spool_empty(spool), timeout=10, interval=0.05, what="every batch answered and deleted")
    assert receiver.jobs_taken() == set(range(100, 400)) | {9001}


def test_one_users_mass_change_never_holds_another_users_event(receiver, forwarder_for, tmp_path):
    """Every bulk slot taken by batches of one user's 7,000 cancels that the portal is still
    writing: another user's cancel goes at once, in a batch of its own (the express lane)."""
    mass = set(range(10_000, 17_000))  # three full batches of 2,000 held, 1,000 left waiting
    receiver.hold_jobs = mass
    # All in the spool before the forwarder looks: written while it looked, the first few would go
    # express (an owner is in the bulk lane once more than 8 of its events wait), a fourth batch.
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o700)
    for job_id in mass:
        _event(spool, job_id, uid=1000)
    assert forwarder_for(receiver.url) == spool
    wait_for(lambda: receiver.held >= 3, timeout=10, interval=0.02, what="three bulk batches, held")
    time.sleep(0.1)
    assert receiver.held == 3, "more than three of one user's batches in flight"
    left = mass - receiver.jobs_taken()
    assert left, "the whole mass change went in the held batches"
    _event(spool, 9001, uid=1001)
    wait_for(lambda: 9001 in receiver.jobs_taken(), timeout=5, interval=0.02, what="the other user's event")
    with receiver.lock:
        assert [batch for batch in receiver.batches if 9001 in batch] == [[9001]]
        assert receiver.held == 3
    receiver.release.set()
    receiver.hold_jobs = set()
    wait_for(lambda: _spool_empty(spool), timeout=20, interval=0.05, what="every batch answered and deleted")
    assert receiver.jobs_taken() == mass | {9001}


def test_events_without_an_owner_still_go(receiver, forwarder_for):
    """Hooks of earlier versions name no owner: their events go in the bulk lane."""
    spool = forwarder_for(receiver.url)
    _event(spool, 301)
    _event(spool, 302, uid=1000)
    (spool / "303.CANCELLED.jobcomp.1764547199.ux").touch()  # not an event's name: never sent
    wait_for(lambda: receiver.jobs_taken() == {301, 302}, timeout=10, interval=0.05, what="both sent")
    time.sleep(0.2)
    assert receiver.jobs_taken() == {301, 302}


def test_a_refused_batch_goes_back_to_the_spool_and_is_sent_again(receiver, forwarder_for):
    receiver.refuse_next = True
    spool = forwarder_for(receiver.url)
    _event(spool, 555)
    wait_for(lambda: len(receiver.batches) >= 1, timeout=10, interval=0.02, what="the refused batch")
    # Refused (503): kept, and sent again after the pause (0.5 s the first time).
    wait_for(lambda: len(receiver.batches) >= 2, timeout=10, interval=0.02, what="the batch sent again")
    assert receiver.batches[:2] == [[555], [555]]
    wait_for(lambda: _spool_empty(spool), timeout=10, interval=0.05, what="the accepted batch deleted")


def test_what_a_killed_forwarder_left_mid_batch_is_sent_by_the_next(receiver, forwarder_for, tmp_path):
    spool = tmp_path / "spool"
    (spool / ".sending" / "b7").mkdir(parents=True, mode=0o700)
    _event(spool / ".sending" / "b7", 701)
    _event(spool / ".sending", 702)  # the flat layout of earlier forwarders
    _event(spool, 703)
    forwarder_for(receiver.url)
    wait_for(lambda: receiver.jobs_taken() == {701, 702, 703}, timeout=10, interval=0.05, what="all three sent")
    wait_for(lambda: _spool_empty(spool), timeout=10, interval=0.05, what="the spool emptied")


def test_a_forwarder_killed_mid_post_loses_nothing(receiver, forwarder_for):
    receiver.hold_next = True
    spool = forwarder_for(receiver.url)
    _event(spool, 901)
    wait_for(lambda: receiver.holding, timeout=10, interval=0.02, what="the batch, held")
    forwarder = forwarder_for.started[-1]
    os.killpg(forwarder.pid, signal.SIGKILL)  # parent and child, mid-post
    forwarder.wait(timeout=10)
    assert [p.name for p in (spool / ".sending").rglob("*.jobcomp.*")] == ["901.CANCELLED.jobcomp.1764547199"]
    receiver.release.set()
    forwarder_for(receiver.url)
    wait_for(lambda: len(receiver.batches) >= 2, timeout=10, interval=0.05, what="the batch sent again")
    assert receiver.batches[-1] == [901]
    wait_for(lambda: _spool_empty(spool), timeout=10, interval=0.05, what="the spool emptied")


def test_nothing_is_lost_while_the_portal_is_unreachable(receiver, forwarder_for, tmp_path):
    # Nothing listens on the port: each try fails, the events stay in the spool (never dropped
    # before they are 10 minutes old), and are sent once the portal is there.
    unreachable = Receiver()
    url = unreachable.url
    unreachable.server_close()
    spool = forwarder_for(url)
    _event(spool, 801)
    _event(spool, 802)
    time.sleep(1.5)
    left = {p.name.split(".")[0] for p in spool.rglob("*.jobcomp.*")}
    assert left == {"801", "802"}
    (tmp_path / "events.conf").write_text(f"url={receiver.url}\nsecret={SECRET}\nspool={spool}\n")
    wait_for(lambda: receiver.jobs_taken() == {801, 802}, timeout=15, interval=0.05, what="sent once reachable")
    wait_for(lambda: _spool_empty(spool), timeout=10, interval=0.05, what="the spool emptied")


def test_an_array_tasks_event_keeps_its_array_and_index(receiver, forwarder_for):
    spool = forwarder_for(receiver.url)
    (spool / "41.COMPLETED.jobcomp.1764547199.40_7").touch()
    (spool / "42.RUNNING.prolog_slurmd").touch()
    (spool / "43.RUNNING.prolog_slurmd.40_x").touch()  # not an event's name: never sent
    wait_for(lambda: receiver.jobs_taken() == {41, 42}, timeout=10, interval=0.05, what="both sent")
    told = {
        event.job_id: (event.state, event.ended_at, event.array_job_id, event.array_task_id)
        for event in receiver.events
    }
    assert told == {41: ("COMPLETED", 1764547199, 40, 7), 42: ("RUNNING", None, None, None)}
