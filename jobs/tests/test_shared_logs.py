"""A member shares a group job's logs with the group's PI and managers: until then they see
its state on the group's job list and nothing of its output; afterwards the PI reads it; a
plain member, an outsider and anyone with another group's id get a 404; unsharing closes it."""

import os

import pytest
from allauth.account.models import EmailAddress
from django.test import Client

from groups import actions as group_actions
from groups.models import GroupRole, Membership
from jobs.models import Job

pytestmark = pytest.mark.django_db
BOB_UID = 4343


@pytest.fixture
def lab_job(settings, tmp_path, alice, bob, django_user_model):
    settings.SLURM_JOB_ROOT = "/srv/gpupool/jobs"
    settings.SLURM_JOB_ROOT_LOCAL = tmp_path / "jobs"
    EmailAddress.objects.create(user=alice, email=alice.email, verified=True, primary=True)
    group = group_actions.create_group(alice, name="Vision lab", slug="vision")
    Membership.objects.create(group=group, user=bob, role=GroupRole.MEMBER)
    bob.profile.cluster_username, bob.profile.cluster_uid, bob.profile.cluster_gid = "b", BOB_UID, BOB_UID
    bob.profile.save()
    log = tmp_path / "jobs" / "b" / "j" / "stdout.log"
    log.parent.mkdir(parents=True)
    log.write_bytes(b"epoch 1 loss 0.42\nRuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    os.chown(log, BOB_UID, BOB_UID)
    return Job.objects.create(
        owner=bob, cluster_user="b", slurm_job_id=9300, name="train", group=group, state="FAILED",
        standard_output="/srv/gpupool/jobs/b/j/stdout.log",
    )  # fmt: skip


def _as(user) -> Client:
    browser = Client()
    browser.force_login(user)
    return browser


def test_the_pi_reads_a_members_logs_only_once_shared(lab_job, alice, bob, django_user_model):
    group = lab_job.group
    url = f"/jobs/group/{group.pk}/{lab_job.pk}/logs/"
    pi = _as(alice)
    assert pi.get(url).status_code == 404  # not shared yet
    assert "data-shared-logs" not in pi.get(f"/jobs/group/{group.pk}/").content.decode()

    owner = _as(bob)
    assert "Share these logs" in owner.get(f"/jobs/{lab_job.pk}/").content.decode()
    owner.post(f"/jobs/{lab_job.pk}/share-logs", {"share": "1"})
    assert "data-shared-logs" in pi.get(f"/jobs/group/{group.pk}/").content.decode()
    page = pi.get(url).content.decode()
    assert "CUDA out of memory" in page and "bob shared" in page

    member = django_user_model.objects.create_user("carol", "carol@x.org", "pw-carol")
    Membership.objects.create(group=group, user=member, role=GroupRole.MEMBER)
    assert _as(member).get(url).status_code == 404  # a plain member does not read others' logs
    outsider = django_user_model.objects.create_user("dave", "dave@x.org", "pw-dave")
    assert _as(outsider).get(url).status_code == 404
    # Another's job cannot be shared by someone else, nor a job without a group.
    assert pi.post(f"/jobs/{lab_job.pk}/share-logs", {"share": "0"}).status_code == 404
    own = Job.objects.create(owner=bob, cluster_user="b", slurm_job_id=9301, name="solo", state="FAILED")
    assert owner.post(f"/jobs/{own.pk}/share-logs", {"share": "1"}).status_code == 404

    owner.post(f"/jobs/{lab_job.pk}/share-logs", {"share": "0"})
    assert pi.get(url).status_code == 404
