"""The tus 1.0 upload: creation, HEAD for the offset, PATCH at the offset only, resuming where
the server stands, and every refusal changing nothing."""

import base64
import hashlib
import os

import pytest

from datasets.models import Upload
from datasets.tests.conftest import TUS, metadata, sha256

pytestmark = pytest.mark.django_db

DATA = os.urandom(20_000)


@pytest.fixture
def tus(alice, photos, tus_for):
    return tus_for(alice, photos)


def _staged(store, upload_id) -> bytes:
    return (store / "staging" / str(upload_id).replace("-", "")).read_bytes()


def test_options_says_what_the_server_supports(tus):
    answer = tus.client.options(f"{tus.base}/uploads/")
    assert answer.status_code == 204
    assert answer["Tus-Version"] == "1.0.0" and answer["Tus-Resumable"] == "1.0.0"
    assert set(answer["Tus-Extension"].split(",")) == {"creation", "checksum", "concatenation"}


def test_create_head_patch_and_resume_at_the_servers_offset(tus, store):
    created = tus.create("train/a.bin", len(DATA), sha256(DATA))
    assert created.status_code == 201, created.content
    url = created["Location"]
    assert url.startswith("http://testserver/api/v1/datasets/") and created["Tus-Resumable"] == "1.0.0"
    assert tus.head(url)["Upload-Offset"] == "0" and tus.head(url)["Upload-Length"] == str(len(DATA))

    first = tus.patch(url, 0, DATA[:7000])
    assert first.status_code == 204 and first["Upload-Offset"] == "7000"
    # The connection drops; the client asks where the server stands and goes on from there.
    offset = int(tus.head(url)["Upload-Offset"])
    assert offset == 7000
    rest = tus.patch(url, offset, DATA[offset:])
    assert rest.status_code == 204 and rest["Upload-Offset"] == str(len(DATA))
    upload = Upload.objects.get()
    assert (upload.offset, upload.state, upload.path) == (len(DATA), Upload.State.COMPLETE, "train/a.bin")
    assert _staged(store, upload.pk) == DATA


def test_a_wrong_offset_is_a_conflict_and_writes_nothing(tus, store):
    url = tus.create("a.bin", len(DATA))["Location"]
    assert tus.patch(url, 0, DATA[:100]).status_code == 204
    for wrong in (0, 50, 101, 5000):
        answer = tus.patch(url, wrong, b"x" * 10)
        assert answer.status_code == 409, wrong
        assert "stands at 100" in answer.json()["detail"]
    assert Upload.objects.get().offset == 100
    assert _staged(store, Upload.objects.get().pk) == DATA[:100]


def test_nothing_past_the_declared_length_is_accepted(tus):
    url = tus.create("a.bin", 100)["Location"]
    answer = tus.patch(url, 0, b"y" * 101)
    assert answer.status_code == 413
    assert Upload.objects.get().offset == 0
    assert tus.patch(url, 0, b"y" * 60).status_code == 204
    assert tus.patch(url, 60, b"y" * 41).status_code == 413
    assert Upload.objects.get().offset == 60


def test_a_patch_must_carry_raw_bytes_and_the_tus_version(tus):
    url = tus.create("a.bin", 10)["Location"]
    as_json = tus.client.generic("PATCH", url, b"{}", content_type="application/json", HTTP_UPLOAD_OFFSET="0", **TUS)
    assert as_json.status_code == 415
    no_version = tus.client.generic(
        "PATCH", url, b"0123456789", content_type="application/offset+octet-stream", HTTP_UPLOAD_OFFSET="0"
    )
    assert no_version.status_code == 412 and no_version["Tus-Version"] == "1.0.0"
    for bad in ("", "-1", "1e3", " 0", "abc"):
        assert tus.patch(url, 0, b"0", HTTP_UPLOAD_OFFSET=bad).status_code == 400, bad
    assert Upload.objects.get().offset == 0


def test_a_chunk_checksum_mismatch_is_refused_and_the_offset_stays(tus):
    url = tus.create("a.bin", 10)["Location"]
    wrong = base64.b64encode(hashlib.sha256(b"something else").digest()).decode()
    answer = tus.patch(url, 0, b"0123456789", HTTP_UPLOAD_CHECKSUM=f"sha256 {wrong}")
    assert answer.status_code == 460 and answer.json()["errors"]["checksum"]
    assert Upload.objects.get().offset == 0
    right = base64.b64encode(hashlib.sha1(b"0123456789").digest()).decode()
    assert tus.patch(url, 0, b"0123456789", HTTP_UPLOAD_CHECKSUM=f"sha1 {right}").status_code == 204
    assert tus.patch(url, 10, b"", HTTP_UPLOAD_CHECKSUM="crc32 AAAA").status_code == 400


@pytest.mark.parametrize(
    "headers, field",
    [
        ({"HTTP_UPLOAD_LENGTH": "-5"}, "Upload-Length"),
        ({"HTTP_UPLOAD_LENGTH": "ten"}, "Upload-Length"),
        ({"HTTP_UPLOAD_METADATA": metadata(name="a.bin")}, "Upload-Metadata"),  # no path
        ({"HTTP_UPLOAD_METADATA": "path not-base64!"}, "Upload-Metadata"),
        ({"HTTP_UPLOAD_METADATA": metadata(path="../etc/passwd")}, "path"),
        ({"HTTP_UPLOAD_METADATA": metadata(path="/abs")}, "path"),
        ({"HTTP_UPLOAD_METADATA": metadata(path="a.bin", sha256="nothex")}, "Upload-Metadata"),
    ],
)
def test_a_bad_creation_is_refused_and_stages_nothing(tus, store, headers, field):
    fields = {"HTTP_UPLOAD_LENGTH": "10", "HTTP_UPLOAD_METADATA": metadata(path="a.bin"), **TUS, **headers}
    answer = tus.client.post(f"{tus.base}/uploads/", **fields)
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["errors"]
    assert not Upload.objects.exists()
    assert not (store / "staging").exists() or not any((store / "staging").iterdir())


def test_a_path_is_uploaded_once_per_version(tus):
    assert tus.create("a/b.bin", 10).status_code == 201
    for path in ("a/b.bin", "a", "a/b.bin/c"):
        answer = tus.create(path, 10)
        assert answer.status_code == 409, path
    assert Upload.objects.count() == 1


def test_an_empty_file_is_complete_at_once(tus):
    created = tus.create("empty.txt", 0, sha256(b""))
    assert created.status_code == 201
    assert Upload.objects.get().state == Upload.State.COMPLETE
