"""Deleting a ready version: its bytes leave the store and the owner's quota, its row and
checksum stay; refused, changing nothing, while a queued or running job mounts it, while it is
pinned, for anyone who may not write the dataset, and for a version that is not ready."""

from __future__ import annotations

import pytest

from audit.models import AuditLog
from datasets import storage
from datasets.models import NodeCopy, NodePin, VersionState
from datasets.quota import used_bytes
from jobs.models import Job, JobDataset
from jobs.submission.spec import SpecError

pytestmark = pytest.mark.django_db(transaction=True)


def _url(version) -> str:
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/"


def _job_mounting(version, owner, state: str) -> Job:
    job = Job.objects.create(owner=owner, state=state, gpu_type="a100", name="reader")
    JobDataset.objects.create(job=job, version=version, name=version.dataset.name, size_bytes=version.size_bytes)
    return job


def test_the_owner_deletes_a_ready_version_its_bytes_go_and_its_checksum_stays(alice, api_client_for, ready):
    client = api_client_for(alice)
    NodeCopy.objects.create(node="gpu-a100-01", version=ready, size_bytes=ready.size_bytes, last_used_at=ready.ready_at)
    _job_mounting(ready, alice, "COMPLETED")  # an ended job does not keep it
    held = used_bytes(ready.dataset)
    assert held == ready.size_bytes > 0 and storage.version_directory(ready.pk).exists()

    answer = client.delete(_url(ready))
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["state"] == "deleted" and body["sha256"] == ready.sha256 and "Deleted by alice" in body["error"]
    assert not storage.version_directory(ready.pk).exists()
    assert used_bytes(ready.dataset) == 0
    assert not NodeCopy.objects.filter(version=ready).exists()  # the node's ds_<id> feature goes with the sync
    assert AuditLog.objects.filter(action="dataset.version.delete").count() == 1
    # Gone for downloads and for new jobs; deleting again is refused.
    assert client.get(_url(ready) + "files/README").status_code == 404
    from jobs.submission.datasets import resolve_mounts
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from jobs.tests.conftest import GOOD_SPEC
    from plans.catalog import plan_for

    spec = parse_job_spec(
        {**GOOD_SPEC, "datasets": [ready.pk]}, plan=plan_for(alice), policy=SpecPolicy.from_settings()
    )
    with pytest.raises(SpecError, match="deleted"):
        resolve_mounts(alice, spec)
    assert client.delete(_url(ready)).status_code == 409


@pytest.mark.parametrize("state", ["PENDING", "RUNNING", "SUBMITTING"])
def test_a_version_a_queued_or_running_job_mounts_stays(alice, api_client_for, ready, state):
    _job_mounting(ready, alice, state)
    answer = api_client_for(alice).delete(_url(ready))
    assert answer.status_code == 409 and "mounted by 1 queued or running job" in answer.json()["detail"]
    ready.refresh_from_db()
    assert ready.state == VersionState.READY and storage.version_directory(ready.pk).exists()


def test_a_pinned_version_stays_until_an_admin_unpins_it(alice, admin_user, api_client_for, ready):
    NodePin.objects.create(node="gpu-h100-01", version=ready, pinned_by=admin_user)
    answer = api_client_for(alice).delete(_url(ready))
    assert answer.status_code == 409 and "pinned to gpu-h100-01" in answer.json()["detail"]
    NodePin.objects.all().delete()
    assert api_client_for(alice).delete(_url(ready)).status_code == 200


def test_others_may_not_delete_it(alice, bob, admin_user, api_client_for, ready):
    assert api_client_for(bob).delete(_url(ready)).status_code == 404  # not theirs to know of
    assert api_client_for(admin_user).delete(_url(ready)).status_code == 403  # admins read, owners write
    ready.refresh_from_db()
    assert ready.state == VersionState.READY and storage.version_directory(ready.pk).exists()
    assert not AuditLog.objects.filter(action="dataset.version.delete").exists()


def test_an_open_version_is_abandoned_not_deleted(alice, photos, tus_for, api_client_for):
    tus = tus_for(alice, photos)
    tus.upload("README", b"hello\n")
    answer = api_client_for(alice).delete(f"/api/v1/datasets/{photos.pk}/versions/1/")
    assert answer.status_code == 409 and "only a ready one" in answer.json()["detail"]


def test_the_page_offers_delete_to_writers_and_confirms_first(alice, admin_user, client, ready):
    client.force_login(admin_user)
    assert "data-delete-version" not in client.get(f"/datasets/{ready.dataset_id}/").content.decode()
    client.force_login(alice)
    page = client.get(f"/datasets/{ready.dataset_id}/").content.decode()
    assert "data-delete-version" in page and "data-confirm=" in page
    done = client.post(f"/datasets/{ready.dataset_id}/versions/{ready.number}/delete", follow=True)
    assert "Version 1 is deleted" in done.content.decode()
    ready.refresh_from_db()
    assert ready.state == VersionState.DELETED


def test_a_submission_that_read_the_version_before_its_deletion_is_refused(alice, ready):
    from django.db import transaction

    from datasets import actions
    from jobs.submission.datasets import Mount, lock_mounted_versions

    mount = Mount(version=ready, name="photos")  # as resolve_mounts found it, ready
    actions.delete_version(ready, alice)
    with pytest.raises(SpecError, match="deleted meanwhile"), transaction.atomic():
        lock_mounted_versions([mount])
