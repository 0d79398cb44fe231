"""Two beats started at once send each periodic task once (gpupool/beat.py), on the real Redis.

Marked django_db only to be kept out of the pure tier: it needs Redis (REDIS_URL)."""

import os
import socket
import subprocess
import sys
import time

import pytest

from foundation.redis_client import redis_client
from gpupool.beat import BeatLease, SingleBeatScheduler

pytestmark = pytest.mark.django_db


@pytest.fixture
def lease_key():
    key = "gpupool:test:beat-leader"
    redis_client().delete(key)
    yield key
    redis_client().delete(key)


def test_one_lease_holder_at_a_time(lease_key):
    first, second = BeatLease(key=lease_key), BeatLease(key=lease_key)
    assert first.hold()
    assert not second.hold()
    assert first.hold(), "the holder renews its own lease"
    first.release()
    assert second.hold(), "the standby takes over once the leader lets go"
    assert not first.hold()


def test_a_beat_that_lost_its_lease_stands_by_and_never_deletes_the_new_one(lease_key):
    first, second = BeatLease(key=lease_key), BeatLease(key=lease_key)
    assert first.hold()
    redis_client().delete(lease_key)  # Redis restarted without its data
    assert second.hold()
    assert not first.hold()
    first.held = True  # even a beat that still believes it leads
    first.release()
    assert redis_client().get(lease_key).decode() == second.token


def test_a_lease_runs_out_when_its_beat_dies(lease_key):
    first = BeatLease(key=lease_key, seconds=1)
    assert first.hold()
    redis_client().pexpire(lease_key, 1)  # what a second without renewal leads to
    time.sleep(0.05)
    assert BeatLease(key=lease_key).hold()


def test_two_beats_send_each_due_task_once(tmp_path, lease_key, monkeypatch):
    from gpupool.celery import app

    sent = []

    class Lease(BeatLease):
        def __init__(self):
            super().__init__(key=lease_key)

    def record(scheduler, entry, producer=None, advance=True, **kwargs):
        sent.append((scheduler.lease.token, entry.name))

    monkeypatch.setattr(SingleBeatScheduler, "lease_class", Lease)
    monkeypatch.setattr(SingleBeatScheduler, "apply_async", record)
    schedule = {"often": {"task": "jobs.tasks.reconcile_submissions", "schedule": 0.001}}
    beats = [
        SingleBeatScheduler(app=app, schedule_filename=str(tmp_path / f"beat-{n}"), max_interval=1) for n in range(2)
    ]
    for beat in beats:
        beat.update_from_dict(schedule)
    try:
        for _ in range(6):
            for beat in beats:
                beat.tick()
    finally:
        for beat in beats:
            beat.close()
    senders = {token for token, name in sent if name == "often"}
    assert len(senders) == 1, sent
    assert sent, "the leader sent the due task"


def test_a_restarted_beat_takes_over_at_once_from_its_dead_predecessor_on_this_host(lease_key):
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    redis_client().set(lease_key, f"{socket.gethostname()}:{gone.pid}:dead", px=30_000)
    restarted = BeatLease(key=lease_key)
    assert restarted.hold(), "a killed beat's lease must not stop the periodic tasks for its 30 s"
    assert redis_client().get(lease_key).decode() == restarted.token


def test_a_live_holder_or_another_hosts_holder_is_waited_for(lease_key):
    redis_client().set(lease_key, f"{socket.gethostname()}:{os.getpid()}:alive", px=30_000)
    assert not BeatLease(key=lease_key).hold()
    redis_client().set(lease_key, "another-host:1:remote", px=30_000)
    assert not BeatLease(key=lease_key).hold(), "only this host can tell whether its own process is gone"
