"""tus concatenation: a file sent as parts over several connections at once, joined by a final
upload into one file of the version; every refusal changes nothing, and parts never become files."""

import os

import pytest

from datasets.models import DatasetVersion, Upload, VersionState
from datasets.quota import used_bytes
from datasets.tests.conftest import TUS, metadata, sha256

pytestmark = pytest.mark.django_db

DATA = os.urandom(30_000)


@pytest.fixture
def tus(alice, photos, tus_for):
    return tus_for(alice, photos)


def _part(tus, data: bytes, *, send: bool = True, path: str = "") -> str:
    fields = {"HTTP_UPLOAD_LENGTH": str(len(data)), "HTTP_UPLOAD_CONCAT": "partial", **TUS}
    if path:
        fields["HTTP_UPLOAD_METADATA"] = metadata(path=path)
    created = tus.client.post(f"{tus.base}/uploads/", **fields)
    assert created.status_code == 201, created.content
    assert created.json()["partial"] is True
    url = created["Location"]
    if send:
        assert tus.patch(url, 0, data).status_code == 204
    return url


def _final(tus, path: str, urls: list[str], digest: str | None = None):
    fields = {"HTTP_UPLOAD_CONCAT": "final;" + " ".join(urls), **TUS}
    fields["HTTP_UPLOAD_METADATA"] = metadata(path=path, **({"sha256": digest} if digest else {}))
    return tus.client.post(f"{tus.base}/uploads/", **fields)


def _staged_files(store) -> list[str]:
    return sorted(path.name for path in (store / "staging").iterdir()) if (store / "staging").exists() else []


def test_parts_sent_apart_become_one_file_of_the_version_with_its_sha256(
    tus, photos, store, eager_tasks, django_capture_on_commit_callbacks
):
    pieces = [DATA[:10_000], DATA[10_000:25_000], DATA[25_000:]]
    urls = [_part(tus, piece, path="big.bin") for piece in pieces]
    assert tus.head(urls[0])["Upload-Concat"] == "partial"
    assert used_bytes(photos) == len(DATA)  # the parts hold the file's room
    with django_capture_on_commit_callbacks(execute=True):
        answer = _final(tus, "big.bin", urls, sha256(DATA))
    assert answer.status_code == 201, answer.content
    final = Upload.objects.get(path="big.bin", partial=False)
    assert (final.state, final.offset, final.length) == (Upload.State.COMPLETE, len(DATA), len(DATA))
    assert tus.head(answer["Location"])["Upload-Offset"] == str(len(DATA))
    assert Upload.objects.filter(partial=True).exclude(state=Upload.State.ABANDONED).count() == 0
    assert _staged_files(store) == [str(final.pk).replace("-", "")]  # the parts' bytes are gone
    assert used_bytes(photos) == len(DATA)  # counted once

    with django_capture_on_commit_callbacks(execute=True):
        assert tus.commit().status_code == 202
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.READY, version.error
    assert [(f.path, f.size_bytes, f.sha256) for f in version.files.all()] == [("big.bin", len(DATA), sha256(DATA))]


def test_a_final_upload_is_refused_for_bad_parts_and_changes_nothing(tus, alice, bob, tus_for, store):
    from datasets import actions

    done = _part(tus, DATA[:100])
    unfinished = _part(tus, DATA[:100], send=False)
    whole = tus.upload("taken.bin", DATA[:50])  # a file, not a part
    elsewhere = actions.create_dataset(bob, name="bobs")
    bobs_part = _part(tus_for(bob, elsewhere), DATA[:10])
    cases = [
        ([done, unfinished], 409, "holds 0 of its 100 bytes"),
        ([done, done], 400, "different parts"),
        ([done, whole], 400, "Not a part of this version"),
        ([done, bobs_part], 400, "Not a part of this version"),
    ]
    for urls, status, words in cases:
        answer = _final(tus, "joined.bin", urls)
        assert answer.status_code == status, answer.content
        assert words in answer.json()["detail"]
    assert _final(tus, "taken.bin", [done]).status_code == 409  # the path is a file already
    assert _final(tus, "../x", [done]).status_code == 400
    for value in ("final;", "final;https://example.org/nothing", "whole"):
        answer = tus.client.post(f"{tus.base}/uploads/", HTTP_UPLOAD_CONCAT=value, **TUS)
        assert answer.status_code == 400 and "Upload-Concat" in answer.json()["errors"], value
    assert not Upload.objects.filter(path="joined.bin").exists()
    assert Upload.objects.get(pk=done.rsplit("/", 1)[1]).state == Upload.State.COMPLETE  # still usable
    assert _final(tus, "joined.bin", [done]).status_code == 201


def test_parts_never_joined_are_dropped_at_commit(tus, photos, store, eager_tasks, django_capture_on_commit_callbacks):
    stray = _part(tus, DATA[:100], path="lost.bin")
    tus.upload("kept.bin", DATA[:10])
    with django_capture_on_commit_callbacks(execute=True):
        assert tus.commit().status_code == 202
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.READY, version.error
    assert [f.path for f in version.files.all()] == ["kept.bin"]
    assert Upload.objects.get(pk=stray.rsplit("/", 1)[1]).state == Upload.State.ABANDONED
    assert used_bytes(photos) == 10
    assert str(stray.rsplit("/", 1)[1]).replace("-", "") not in _staged_files(store)
