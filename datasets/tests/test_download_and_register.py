"""Downloading a ready version's file, and admins registering a directory of shared storage as a
version: who may, and the hostile cases (links, special files, paths outside the roots, quota)."""

from __future__ import annotations

import base64
import hashlib
import os

import pytest

from datasets.manifest import manifest_sha256
from datasets.models import DatasetVersion, VersionState
from datasets.tests.conftest import READY_FILES, sha256

pytestmark = pytest.mark.django_db(transaction=True)

FILES = READY_FILES


def _file_url(version, path):
    return f"/api/v1/datasets/{version.dataset_id}/versions/{version.number}/files/{path}"


def _body(response) -> bytes:
    return b"".join(response.streaming_content)


def test_the_owner_downloads_a_file_with_its_size_and_sha256(alice, api_client_for, ready):
    answer = api_client_for(alice).get(_file_url(ready, "train/a.bin"), HTTP_ACCEPT="application/octet-stream")
    assert answer.status_code == 200
    assert _body(answer) == FILES["train/a.bin"]
    assert answer["Content-Length"] == "3000"
    assert answer["Digest"] == "sha-256=" + base64.b64encode(hashlib.sha256(FILES["train/a.bin"]).digest()).decode()
    assert "a.bin" in answer["Content-Disposition"]


def test_another_user_gets_404_and_an_admin_reads(alice, bob, admin_user, api_client_for, ready):
    assert api_client_for(bob).get(_file_url(ready, "README")).status_code == 404
    answer = api_client_for(admin_user).get(_file_url(ready, "README"))
    assert answer.status_code == 200 and _body(answer) == b"hello\n"


def test_a_path_outside_the_manifest_or_a_link_planted_in_the_store_is_not_served(alice, api_client_for, ready, store):
    client = api_client_for(alice)
    assert client.get(_file_url(ready, "train/missing.bin")).status_code == 404
    assert client.get(_file_url(ready, "../../grants/x")).status_code == 404
    tree = store / "versions" / str(ready.pk)
    (tree / "README").unlink()
    (tree / "README").symlink_to("/etc/passwd")
    answer = client.get(_file_url(ready, "README"))
    assert answer.status_code == 404 and b"root:" not in answer.content


def test_an_open_versions_files_are_not_downloadable(alice, photos, tus_for, api_client_for):
    tus = tus_for(alice, photos)
    tus.upload("x.bin", b"partial")
    version = DatasetVersion.objects.get(dataset=photos)
    assert api_client_for(alice).get(_file_url(version, "x.bin")).status_code == 404


# --- registering from shared storage ------------------------------------------------------------


@pytest.fixture
def shared(settings, tmp_path):
    root = tmp_path / "shared"
    root.mkdir()
    settings.DATASET_IMPORT_ROOTS = [str(root)]
    source = root / "imagenet"
    (source / "train").mkdir(parents=True)
    for path, data in FILES.items():
        (source / path).write_bytes(data)
    return source


def _register(client, dataset, path):
    return client.post(f"/api/v1/datasets/{dataset.pk}/versions/register", {"path": str(path)}, format="json")


def test_an_admin_registers_a_directory_as_a_ready_version_with_the_uploads_checksum(
    admin_user, photos, api_client_for, shared, eager_tasks, store
):
    answer = _register(api_client_for(admin_user), photos, shared)
    assert answer.status_code == 202, answer.content
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.READY, version.error
    expected = manifest_sha256([(path, len(data), sha256(data)) for path, data in FILES.items()])
    assert (version.sha256, version.file_count, version.source_path) == (expected, 2, str(shared))
    assert (store / "versions" / str(version.pk) / "train/a.bin").read_bytes() == FILES["train/a.bin"]


def test_only_admins_register_and_only_under_the_roots(alice, admin_user, photos, api_client_for, shared, tmp_path):
    refused = _register(api_client_for(alice), photos, shared)
    assert refused.status_code == 403
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    answer = _register(api_client_for(admin_user), photos, outside)
    assert answer.status_code == 400 and "must lie under" in answer.json()["errors"]["path"][0]
    answer = _register(api_client_for(admin_user), photos, f"{shared}/../../elsewhere")
    assert answer.status_code == 400
    assert not DatasetVersion.objects.exists()


@pytest.mark.parametrize("plant", ["symlink", "fifo", "symlinked-folder"])
def test_a_link_or_special_file_in_the_directory_fails_the_version_naming_it(
    admin_user, photos, api_client_for, shared, eager_tasks, plant
):
    if plant == "symlink":
        (shared / "train/evil").symlink_to("/etc/shadow")
    elif plant == "fifo":
        os.mkfifo(shared / "train/pipe")
    else:
        (shared / "etc").symlink_to("/etc", target_is_directory=True)
    assert _register(api_client_for(admin_user), photos, shared).status_code == 202
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.FAILED
    assert "only regular files and folders are registered" in version.error
    assert not version.files.exists()


def test_a_directory_over_the_owners_quota_fails_before_a_byte_is_copied(
    admin_user, alice, photos, api_client_for, shared, eager_tasks, store
):
    from conftest import subscribe

    subscribe(alice, "free")  # 0 GB of NVMe
    assert _register(api_client_for(admin_user), photos, shared).status_code == 202
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.FAILED and "Over the NVMe quota" in version.error
    assert not (store / "versions" / str(version.pk) / "README").exists()
