"""Logs: capped tails, whole-file downloads, and the diagnosis at the top of a failed job."""

import pytest

from jobs.models import Job

pytestmark = pytest.mark.django_db


@pytest.fixture
def job_root(settings, tmp_path):
    settings.SLURM_JOB_ROOT = "/srv/gpupool/jobs"
    settings.SLURM_JOB_ROOT_LOCAL = tmp_path
    return tmp_path


def _job_with_logs(owner, job_root, stdout: bytes, stderr: bytes = b"", **fields) -> Job:
    (job_root / "u" / "j").mkdir(parents=True)
    (job_root / "u" / "j" / "stdout.log").write_bytes(stdout)
    (job_root / "u" / "j" / "stderr.log").write_bytes(stderr)
    return Job.objects.create(
        owner=owner,
        cluster_user="u",
        slurm_job_id=9100,
        standard_output="/srv/gpupool/jobs/u/j/stdout.log",
        standard_error="/srv/gpupool/jobs/u/j/stderr.log",
        **fields,
    )


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
    secret.write_text("SECRET_KEY=do-not-leak\n")
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
    (job_root / "victim" / "x").mkdir(parents=True)
    (job_root / "victim" / "x" / "stdout.log").write_text("victim's training data path\n")
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
