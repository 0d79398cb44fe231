"""Logs: capped tails, whole-file downloads, and the diagnosis at the top of a failed job;
and what a job can leave in its own directory in place of a log (a symlink, a FIFO, a file
of another uid, a file that keeps growing) is never followed, waited on or read."""

import os
import sys
import threading
import time

import pytest

from jobs.logs import local_log_path, read_tail
from jobs.models import Job

pytestmark = pytest.mark.django_db

OWNER = 4242  # alice's cluster uid in these tests; need not exist on this host


def _write(path, data: bytes, uid: int = OWNER):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    # Slurm creates a job's logs as the job's user; tests run as root and do the same.
    os.chown(path, uid, uid)


def _job_with_logs(owner, job_root, stdout: bytes, stderr: bytes = b"", **fields) -> Job:
    _write(job_root / "u" / "j" / "stdout.log", stdout)
    _write(job_root / "u" / "j" / "stderr.log", stderr)
    return Job.objects.create(
        owner=owner,
        cluster_user="u",
        slurm_job_id=9100,
        standard_output="/srv/gpupool/jobs/u/j/stdout.log",
        standard_error="/srv/gpupool/jobs/u/j/stderr.log",
        **fields,
    )


def _browser(user):
    from django.test import Client

    browser = Client()
    browser.force_login(user)
    return browser


def test_a_huge_log_is_capped_and_downloadable_whole(alice, api_client_for, job_root, settings):
    settings.LOG_TAIL_BYTES = 4096
    big = b"".join(b"line %07d of a long training log\n" % i for i in range(100_000))  # ~3.4 MB
    job = _job_with_logs(alice, job_root, big, state="RUNNING")
    body = api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert body["truncated"] is True
    assert len(body["stdout"].encode()) <= 4096
    assert body["stdout"].endswith("line 0099999 of a long training log\n")
    assert body["stdout"].startswith("line ")  # starts on a line boundary
    assert body["stdout_size"] == len(big)

    from django.test import Client

    browser = Client()
    browser.force_login(alice)
    download = browser.get(f"/jobs/{job.pk}/logs/stdout/download")
    assert download.status_code == 200
    assert b"".join(download.streaming_content) == big


def test_a_failed_job_shows_cause_and_fix_first(alice, job_root):
    from django.test import Client

    log = (
        b"epoch 1/10 loss=2.31\n"
        b"Traceback (most recent call last):\n"
        b'  File "train.py", line 42, in <module>\n'
        b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 39.39 GiB total capacity)\n"
    )
    job = _job_with_logs(alice, job_root, b"", log, state="FAILED", exit_code=1)
    browser = Client()
    browser.force_login(alice)
    page = browser.get(f"/jobs/{job.pk}/").content.decode()
    assert "data-diagnosis" in page
    assert page.index("data-diagnosis") < page.index('dl class="facts"')
    assert "CUDA out of memory" in page
    assert "Tried to allocate 2.00 GiB" in page  # the evidence line


def test_logs_of_another_users_job_are_not_served(alice, bob, job_root):
    from django.test import Client

    job = _job_with_logs(alice, job_root, b"secret\n", state="COMPLETED")
    browser = Client()
    browser.force_login(bob)
    assert browser.get(f"/jobs/{job.pk}/logs/stdout/download").status_code == 404
    assert browser.get(f"/jobs/{job.pk}/logs.json").status_code == 404


def test_a_log_path_outside_the_job_root_is_never_read(alice, api_client_for, job_root):
    job = Job.objects.create(
        owner=alice, cluster_user="u", slurm_job_id=9101, state="COMPLETED", standard_output="/etc/passwd"
    )
    body = api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert body["stdout"] == ""


def test_a_symlinked_log_is_never_followed(alice, api_client_for, job_root):
    from django.test import Client

    secret = job_root / "portal-secret"
    _write(secret, b"SECRET_KEY=do-not-leak\n")
    job = _job_with_logs(alice, job_root, b"", state="COMPLETED")
    log = job_root / "u" / "j" / "stdout.log"
    log.unlink()
    log.symlink_to(secret)  # what a job could do in its own directory
    body = api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert "do-not-leak" not in str(body)
    browser = Client()
    browser.force_login(alice)
    assert browser.get(f"/jobs/{job.pk}/logs/stdout/download").status_code == 404


def test_a_log_in_another_users_directory_is_never_read(alice, api_client_for, job_root):
    # Even a file with alice's uid: the directory decides, not only the owner.
    _write(job_root / "victim" / "x" / "stdout.log", b"victim's training data path\n")
    job = Job.objects.create(
        owner=alice,
        cluster_user="u",
        slurm_job_id=9102,
        state="COMPLETED",
        standard_output="/srv/gpupool/jobs/victim/x/stdout.log",
    )
    assert api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"] == ""


def test_anonymous_download_is_sent_to_log_in(client):
    assert client.get("/jobs/1/logs/stdout/download").status_code == 302


def test_the_new_job_page_renders_with_gpu_types_of_the_plan(alice, client):
    client.force_login(alice)
    page = client.get("/jobs/new/").content.decode()
    assert 'value="a100"' in page and 'value="h100"' not in page  # pro: rtx4090 and a100


def test_a_log_of_another_uid_is_never_read(alice, api_client_for, job_root):
    # A job's hard link to a file it could not read itself carries the file's owner.
    job = _job_with_logs(alice, job_root, b"", state="COMPLETED")
    _write(job_root / "u" / "j" / "stdout.log", b"root's secret\n", uid=0)
    assert api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"] == ""
    assert _browser(alice).get(f"/jobs/{job.pk}/logs/stdout/download").status_code == 404
    # The same file is served once it is alice's: the owner is what was refused.
    os.chown(job_root / "u" / "j" / "stdout.log", OWNER, OWNER)
    assert api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"] == "root's secret\n"


def test_no_log_is_read_while_the_owners_cluster_uid_is_unknown(alice, api_client_for, job_root):
    job = _job_with_logs(alice, job_root, b"hello\n", state="COMPLETED")
    assert api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"] == "hello\n"
    alice.profile.cluster_uid = None
    alice.profile.save()
    assert local_log_path(job.standard_output, "u") is None
    assert api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()["stdout"] == ""


def test_a_log_in_a_symlinked_directory_is_never_read(alice, api_client_for, job_root):
    _write(job_root / "portal" / "j" / "stdout.log", b"SECRET_KEY=do-not-leak\n")  # alice's uid, even
    job = _job_with_logs(alice, job_root, b"", state="COMPLETED")
    os.rename(job_root / "u" / "j", job_root / "u" / "parked")
    (job_root / "u" / "j").symlink_to(job_root / "portal" / "j")  # a middle component
    assert "do-not-leak" not in str(api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json())
    assert _browser(alice).get(f"/jobs/{job.pk}/logs/stdout/download").status_code == 404


def _within_a_second(call, fifo):
    done = []
    worker = threading.Thread(target=lambda: done.append(call()), daemon=True)
    worker.start()
    worker.join(timeout=1)
    if worker.is_alive():
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # release the stuck reader
        pytest.fail("reading a FIFO as a log blocked")
    return done[0]


@pytest.mark.django_db(transaction=True)  # the request runs in another thread
def test_a_fifo_as_a_log_answers_at_once(alice, api_client_for, job_root):
    job = _job_with_logs(alice, job_root, b"", state="FAILED")
    fifo = job_root / "u" / "j" / "stdout.log"
    fifo.unlink()
    os.mkfifo(fifo)  # nothing ever writes to it
    os.chown(fifo, OWNER, OWNER)
    api = api_client_for(alice)
    browser = _browser(alice)
    started = time.monotonic()
    body = _within_a_second(lambda: api.get(f"/api/v1/jobs/{job.pk}/logs").json(), fifo)
    assert body["stdout"] == "" and body["stdout_size"] == 0
    assert _within_a_second(lambda: browser.get(f"/jobs/{job.pk}/logs/stdout/download").status_code, fifo) == 404
    assert time.monotonic() - started < 2


def test_a_download_ends_where_the_log_ended_when_it_began(alice, job_root):
    job = _job_with_logs(alice, job_root, b"line\n" * 2000, state="RUNNING")
    download = _browser(alice).get(f"/jobs/{job.pk}/logs/stdout/download")
    with open(job_root / "u" / "j" / "stdout.log", "ab") as log:
        log.write(b"written after the download began\n" * 10_000)  # the job goes on
    assert int(download["Content-Length"]) == 10_000
    assert b"".join(download.streaming_content) == b"line\n" * 2000


def test_a_growing_log_yields_at_most_the_cap(alice, job_root):
    """The old tail read a whole file that looked small; one that grew in between came
    back whole. A writer appends as fast as it can while the tail is read."""
    _job_with_logs(alice, job_root, b"", state="RUNNING")
    path = local_log_path("/srv/gpupool/jobs/u/j/stdout.log", "u")
    stop = threading.Event()

    def grow():
        with open(job_root / "u" / "j" / "stdout.log", "ab") as log:
            while not stop.is_set():
                log.write(b"x" * 1023 + b"\n")
                log.flush()

    writer = threading.Thread(target=grow, daemon=True)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    writer.start()
    try:
        sizes = []
        for _ in range(500):
            tail = read_tail(path, 4096)
            assert len(tail.text.encode()) <= 4096
            sizes.append(tail.size)
    finally:
        stop.set()
        writer.join()
        sys.setswitchinterval(switch_interval)
    assert sizes[-1] > sizes[0]  # it really grew while being read


def test_swapping_the_job_directory_never_shows_the_target(alice, job_root):
    """The owner polls logs.json while their job flips its directory between a real one
    and a symlink to a file of theirs elsewhere (the portal's secrets, in an attack)."""
    _job_with_logs(alice, job_root, b"REAL\n", state="RUNNING")
    _write(job_root / "outside" / "stdout.log", b"TARGET\n")
    path = local_log_path("/srv/gpupool/jobs/u/j/stdout.log", "u")
    stop = threading.Event()

    def swap():
        directory, parked = job_root / "u" / "j", job_root / "u" / "j.parked"
        while not stop.is_set():
            os.rename(directory, parked)
            os.symlink(job_root / "outside", directory)
            os.unlink(directory)
            os.rename(parked, directory)

    swapper = threading.Thread(target=swap, daemon=True)
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    swapper.start()
    seen = {"REAL\n": 0, "": 0}
    reads = 0
    deadline = time.monotonic() + 60
    try:
        # Thousands of reads, and until both outcomes came up often: the race really ran.
        while reads < 3000 or min(seen.values()) < 20:
            assert time.monotonic() < deadline, f"the race did not run both ways: {seen}"
            text = read_tail(path, 4096).text
            reads += 1
            assert "TARGET" not in text, f"read the symlink's target after {reads} reads"
            assert text in seen
            seen[text] += 1
    finally:
        stop.set()
        swapper.join()
        sys.setswitchinterval(switch_interval)


def test_the_page_shows_the_jobs_own_lines_and_keeps_the_nodes_setup_lines_apart(alice, api_client_for, job_root):
    """The container's epoch stamps and the node tools' lines never sit under "Errors"; the
    API and the download keep the files as written."""
    stdout = (
        b"[gpupool] job 1f2e on node gpu-a100-01, GPUs (CUDA_VISIBLE_DEVICES): 0\n"
        b"[gpupool] staging datasets on this node\n"
        b"GPUPOOL_DATASET_PROGRESS 4 600 1000\n"
        b"GPUPOOL_DATASET_VIEW /mnt/nvme/views/1f2e\n"
        b"[gpupool] datasets in /data\n"
        b"[INFO] step 1 of my own training\n"
    )
    stderr = (
        b"[gpupool] container launch at 1765000000.123456\n"
        b"pyxis: importing docker image: nvcr.io#nvidia/pytorch:24.05-py3\n"
        b"pyxis: imported docker image: nvcr.io#nvidia/pytorch:24.05-py3\n"
        b"[gpupool] container started at 1765000001.523456\n"
        b"train.py: warning: learning rate is high\n"
    )
    job = _job_with_logs(alice, job_root, stdout, stderr, state="RUNNING")
    page = _browser(alice).get(f"/jobs/{job.pk}/").content.decode()
    errors = page.split('data-log="stderr">', 1)[1].split("</pre>", 1)[0]
    assert errors == "train.py: warning: learning rate is high\n"
    output = page.split('data-log="stdout"', 1)[1].split("</pre>", 1)[0]
    assert "[INFO] step 1 of my own training" in output and "GPUs (CUDA_VISIBLE_DEVICES): 0" in output
    assert "GPUPOOL_DATASET" not in output and "staging datasets" not in output
    setup = page.split('data-log="setup">', 1)[1].split("</pre>", 1)[0]
    assert "GPUPOOL_DATASET_PROGRESS 4 600 1000" in setup and "pyxis: imported docker image" in setup
    assert "1765000000" not in page  # no epoch stamp anywhere on the page
    polled = _browser(alice).get(f"/jobs/{job.pk}/logs.json").json()
    assert polled["stderr"] == errors and "pyxis: importing" in polled["setup"]
    raw = api_client_for(alice).get(f"/api/v1/jobs/{job.pk}/logs").json()
    assert raw["stderr"] == stderr.decode() and raw["stdout"] == stdout.decode()
