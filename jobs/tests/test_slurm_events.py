"""Events from slurmctld: the signed nudge, its refusals, and the real sender
(deploy/slurm-events/gpupool-slurm-event, Perl, run inside the dev cluster's root) posting
to a real Daphne."""

import os
import shutil
import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from channels.testing import HttpCommunicator
from django.conf import settings

from cluster.services import rest_client, slurm_cli
from jobs.live import slurm_events
from jobs.live.asgi_events import events_app
from jobs.mirror.passes import mirror_jobs
from jobs.models import Job
from testing.servers import BASE_DIR, portal_stack
from testing.slurm import submission, wait_for, wait_until_requeued

SECRET = "test-events-secret-0123456789"
SENDER = Path(__file__).resolve().parents[2] / "deploy" / "slurm-events" / "gpupool-slurm-event"


@pytest.fixture
def events_on(settings):
    settings.SLURM_EVENTS_SECRET = SECRET
    return settings


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


def test_the_endpoint_refuses_bodies_and_bad_signatures_before_doing_anything(events_on, monkeypatch):
    taken = []
    monkeypatch.setattr("jobs.live.asgi_events.accept", lambda event: taken.append(event) or 0)
    line, signature = _signed(7)
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
def test_the_perl_sender_in_the_slurm_root_reaches_the_portal(held_job, tmp_path):
    """The sender as slurmctld would run it (inside the root, Perl core modules only), posting
    to Daphne: the job's cancel shows without any mirror pass."""
    client, job_id = held_job
    wait_for(lambda: mirror_jobs(rest_client()) and Job.objects.filter(slurm_job_id=job_id, state="PENDING").exists())
    root = Path(settings.DEVCLUSTER_DIR) / "root"
    name = f"gpupool-event-test-{job_id}"
    with portal_stack(extra_env={"SLURM_EVENTS_SECRET": SECRET}) as base_url:
        shutil.copy(SENDER, root / "tmp" / name)
        (root / "tmp" / f"{name}.conf").write_text(f"url={base_url}/api/v1/slurm/events\nsecret={SECRET}\n")
        try:
            client.cancel_job(job_id)
            started = time.monotonic()
            sent = subprocess.run(
                [
                    *settings.SLURM_CLI_PREFIX,
                    "env",
                    "-i",
                    f"JOBID={job_id}",
                    "JOBSTATE=CANCELLED",
                    f"GPUPOOL_EVENTS_CONF=/tmp/{name}.conf",
                    "/usr/bin/perl",
                    f"/tmp/{name}",
                ],
                capture_output=True,
                text=True,
                timeout=10,
            )
            assert sent.returncode == 0, sent.stderr
            assert time.monotonic() - started < 1  # it forks: the hook never waits for the portal
            wait_for(
                lambda: Job.objects.filter(slurm_job_id=job_id, state="CANCELLED").exists(),
                timeout=5,
                interval=0.05,
                what="the event's write",
            )
        finally:
            (root / "tmp" / name).unlink(missing_ok=True)
            (root / "tmp" / f"{name}.conf").unlink(missing_ok=True)


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
    """Release, requeue and cancel a job in slurmctld: with Daphne alone (no worker, no beat,
    so no mirror pass), each change reaches the row through the hooks slurmctld runs itself
    (PrologSlurmctld, EpilogSlurmctld, jobcomp/script)."""
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
            taken = [line for line in web_log.read_text().splitlines() if "Slurm event:" in line]
            raise AssertionError(
                f"{timed_out}; Slurm says {client.get_job(job_id).states}; events taken: {taken}"
            ) from None

    with portal_stack() as base_url, _events_sent_to(f"{base_url}/api/v1/slurm/events") as secret:
        assert secret
        slurm_cli().run("scontrol", "release", str(job_id))
        assert shows("RUNNING").nodes.startswith("gpu-4090-")
        slurm_cli().requeue_job(job_id)
        # Back in the queue (EpilogSlurmctld runs while the run completes: "PENDING,COMPLETING";
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
