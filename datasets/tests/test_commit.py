"""Committing a version: a worker reads every file back and checks its sha256; only then is the
version ready with its manifest checksum. A partial upload is never a version."""

import pytest
from django.db import transaction

from datasets.manifest import manifest_sha256
from datasets.models import DatasetFile, DatasetVersion, Upload, VersionState
from datasets.tasks import verify_version
from datasets.tests.conftest import sha256

pytestmark = pytest.mark.django_db(transaction=True)

FILES = {"train/a.bin": b"A" * 9000, "train/b.bin": b"B" * 5, "README": b"hello\n"}


@pytest.fixture
def tus(alice, photos, tus_for, eager_tasks):
    return tus_for(alice, photos)


def test_a_committed_version_is_verified_and_ready_with_its_checksum(tus, store):
    for path, data in FILES.items():
        tus.upload(path, data)
    answer = tus.commit()
    assert answer.status_code == 202, answer.content
    version = DatasetVersion.objects.get()
    assert version.state == VersionState.READY, version.error
    expected = manifest_sha256([(path, len(data), sha256(data)) for path, data in FILES.items()])
    assert (version.sha256, version.file_count, version.size_bytes) == (expected, 3, 9011)
    assert {(f.path, f.sha256) for f in DatasetFile.objects.all()} == {(p, sha256(d)) for p, d in FILES.items()}
    tree = store / "versions" / str(version.pk)
    assert (tree / "train" / "a.bin").read_bytes() == FILES["train/a.bin"]
    assert not any((store / "staging").iterdir())
    body = tus.client.get(f"{tus.base}/").json()
    assert body["state"] == "ready" and body["sha256"] == expected and len(body["files"]) == 3
    # The version's id, which a job's `datasets` takes, is in both answers that show the version.
    version = DatasetVersion.objects.get()
    assert body["id"] == version.pk
    assert [v["id"] for v in tus.client.get("/api/v1/datasets/").json()[0]["versions"]] == [version.pk]


def test_a_declared_checksum_that_does_not_match_fails_the_version(tus, store):
    tus.upload("good.bin", b"good")
    tus.upload("bad.bin", b"what arrived", digest=sha256(b"what was meant"))
    assert tus.commit().status_code == 202
    version = DatasetVersion.objects.get()
    assert version.state == VersionState.FAILED
    assert "bad.bin" in version.error and not version.sha256
    assert not DatasetFile.objects.exists()
    assert not any((store / "staging").iterdir()) and not (store / "versions" / str(version.pk)).exists()


def test_a_partial_upload_cannot_be_committed_and_is_no_version(tus):
    created = tus.create("big.bin", 100)
    tus.patch(created["Location"], 0, b"x" * 40)
    answer = tus.commit()
    assert answer.status_code == 409 and "big.bin (40 of 100 bytes)" in answer.json()["detail"]
    assert DatasetVersion.objects.get().state == VersionState.UPLOADING
    assert not DatasetFile.objects.exists()
    listed = tus.client.get("/api/v1/datasets/").json()[0]["versions"]
    assert [(v["number"], v["state"], v["sha256"]) for v in listed] == [(1, "uploading", "")]


def test_an_empty_version_cannot_be_committed(tus):
    assert tus.commit().status_code == 409
    assert DatasetVersion.objects.get().state == VersionState.UPLOADING


def test_a_ready_version_takes_no_more_files_and_verifying_twice_changes_nothing(tus):
    tus.upload("a.bin", b"abc")
    tus.commit()
    version = DatasetVersion.objects.get()
    assert tus.create("late.bin", 3).status_code == 409
    assert verify_version(version.pk) == VersionState.READY
    assert DatasetFile.objects.count() == 1 and Upload.objects.count() == 1
    assert tus.commit().status_code == 409


def test_verification_resumes_after_files_were_moved(tus, store, settings):
    """A worker killed after moving the files finds them in the tree on the next run."""
    tus.upload("x/y.bin", b"payload")
    settings.CELERY_TASK_ALWAYS_EAGER = False
    from gpupool.celery import app

    app.conf.task_always_eager = False
    with transaction.atomic():
        DatasetVersion.objects.update(state=VersionState.VERIFYING)
    upload = Upload.objects.get()
    version = DatasetVersion.objects.get()
    from datasets import storage

    storage.move_into_tree(upload.pk, version.pk, upload.path, upload.length)
    assert verify_version(version.pk) == VersionState.READY
    assert DatasetVersion.objects.get().sha256 == manifest_sha256([("x/y.bin", 7, sha256(b"payload"))])
