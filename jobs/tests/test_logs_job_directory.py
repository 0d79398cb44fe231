"""The worker makes <job root>/<cluster user>/<job uuid> as root before Slurm writes the
job's logs there. The user's own jobs can write in the job root first, so nothing found
in the way (a symlink, another user's directory) is ever chowned or used."""

import os
import uuid

import pytest

from jobs import protocol
from jobs.models import Job

OWNER = 4242  # the cluster uid; need not exist on this host


@pytest.fixture
def job_root(settings, tmp_path):
    settings.SLURM_JOB_ROOT = "/srv/gpupool/jobs"
    settings.SLURM_JOB_ROOT_LOCAL = tmp_path / "jobs"
    (tmp_path / "jobs").mkdir()
    return tmp_path / "jobs"


def _owner(path):
    info = os.lstat(path)
    return info.st_uid, info.st_gid


def test_the_directory_is_made_for_the_user_and_named_as_slurm_sees_it(job_root):
    directory = protocol.make_user_directory("u", "j1", OWNER, OWNER + 1)
    assert str(directory) == "/srv/gpupool/jobs/u/j1"
    assert _owner(job_root / "u") == (OWNER, OWNER + 1)
    assert _owner(job_root / "u" / "j1") == (OWNER, OWNER + 1)
    # A retry after a failed submission finds its own directories and goes on.
    assert protocol.make_user_directory("u", "j1", OWNER, OWNER + 1) == directory


@pytest.mark.django_db
def test_a_symlink_planted_at_the_jobs_directory_is_refused_and_its_target_untouched(alice, job_root, tmp_path):
    victim = tmp_path / "slurm-etc"  # e.g. the directory holding the Slurm JWT key
    victim.mkdir(mode=0o700)
    job = Job.objects.create(owner=alice, cluster_user="u", state="SUBMITTING")
    (job_root / "u").mkdir()
    os.chown(job_root / "u", OWNER, OWNER)
    (job_root / "u" / str(job.uuid)).symlink_to(victim)  # the job UUID is in the API's answers
    with pytest.raises(OSError):
        protocol.prepare_job_directory(job, OWNER, OWNER)
    assert _owner(victim) == (0, 0)


def test_a_symlink_planted_at_the_users_directory_is_refused(job_root, tmp_path):
    victim = tmp_path / "elsewhere"
    victim.mkdir(mode=0o700)
    (job_root / "u").symlink_to(victim)  # before the user's first job: the root is 1777 on the dev cluster
    with pytest.raises(OSError):
        protocol.make_user_directory("u", uuid.uuid4().hex, OWNER, OWNER)
    assert _owner(victim) == (0, 0)
    assert os.listdir(victim) == []


def test_another_users_directory_is_not_adopted(job_root):
    (job_root / "u").mkdir()
    os.chown(job_root / "u", OWNER + 7, OWNER + 7)  # someone else's job got there first
    with pytest.raises(OSError):
        protocol.make_user_directory("u", "j1", OWNER, OWNER)
    assert _owner(job_root / "u") == (OWNER + 7, OWNER + 7)
    assert not (job_root / "u" / "j1").exists()


@pytest.mark.django_db
def test_the_submission_fails_with_a_reason_instead_of_chowning_through_a_link(alice, job_root, tmp_path):
    from jobs.tasks import submit_to_slurm

    victim = tmp_path / "victim"
    victim.mkdir(mode=0o700)
    alice.profile.cluster_username = "u"
    alice.profile.cluster_uid = OWNER
    alice.profile.cluster_gid = OWNER
    alice.profile.save()
    job = Job.objects.create(owner=alice, cluster_user="u", state="SUBMITTING", spec={})
    (job_root / "u").mkdir()
    os.chown(job_root / "u", OWNER, OWNER)
    (job_root / "u" / str(job.uuid)).symlink_to(victim)
    assert submit_to_slurm.run(job.pk) == "failed"
    job.refresh_from_db()
    assert job.state == "SUBMIT_FAILED"
    # The path and the reason are for admins: in `error`, or in `error_detail` where it exists.
    assert "symlink" in job.error + getattr(job, "error_detail", "")
    assert _owner(victim) == (0, 0)
