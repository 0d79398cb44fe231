"""scripts/gpupool-dataset-upload against a live portal: a directory becomes a ready version
with every file's checksum, and a second run after a break resumes where the server stands."""

import hashlib
import importlib.machinery
import importlib.util
from pathlib import Path

import pytest

from accounts.models import ApiToken
from datasets.manifest import manifest_sha256
from datasets.models import DatasetVersion, Upload

pytestmark = pytest.mark.django_db(transaction=True)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpupool-dataset-upload"


def _cli():
    loader = importlib.machinery.SourceFileLoader("gpupool_dataset_upload", str(SCRIPT))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_a_directory_is_uploaded_resumed_and_ready(alice, photos, live_server, tmp_path, monkeypatch, eager_tasks):
    folder = tmp_path / "data"
    (folder / "train").mkdir(parents=True)
    files = {"train/a.bin": b"a" * (9 * 1024 * 1024), "labels.csv": b"x,y\n1,2\n"}
    for path, data in files.items():
        (folder / path).write_bytes(data)
    (folder / "link").symlink_to("/etc/passwd")  # skipped, never followed
    _token, key = ApiToken.issue(alice, "cli")
    monkeypatch.setenv("GPUPOOL_TOKEN", key)
    cli = _cli()

    # A first run breaks after its first chunk (the laptop closes).
    real_request = cli.Portal.request
    patches = []

    def breaking(self, method, url, body=None, headers=None):
        if method == "PATCH":
            patches.append(headers["Upload-Offset"])
            if len(patches) == 3:  # labels.csv whole, then a.bin's first 8 MiB, then the break
                raise KeyboardInterrupt
        return real_request(self, method, url, body, headers)

    monkeypatch.setattr(cli.Portal, "request", breaking)
    with pytest.raises(KeyboardInterrupt):
        cli.main([live_server.url, str(photos.pk), str(folder)])
    assert {upload.path: upload.offset for upload in Upload.objects.all()} == {
        "labels.csv": 8,
        "train/a.bin": 8 * 1024 * 1024,
    }
    monkeypatch.setattr(cli.Portal, "request", real_request)

    sent = []
    monkeypatch.setattr(
        cli.Portal,
        "request",
        lambda self, m, u, b=None, h=None: (sent.append((m, h)), real_request(self, m, u, b, h))[1],
    )
    assert cli.main([live_server.url, str(photos.pk), str(folder)]) == 0
    # The second run sent only what was missing: the big file's last MiB, nothing again.
    assert [int(h["Upload-Offset"]) for m, h in sent if m == "PATCH"] == [8 * 1024 * 1024]
    version = DatasetVersion.objects.get()
    expected = manifest_sha256([(path, len(data), hashlib.sha256(data).hexdigest()) for path, data in files.items()])
    assert (version.state, version.number, version.sha256, version.file_count) == ("ready", 1, expected, 2)


def test_a_connection_dropped_mid_chunk_is_reopened_and_the_upload_finishes(
    alice, photos, live_server, tmp_path, monkeypatch, eager_tasks
):
    """The CLI keeps one connection open; when it breaks (a proxy's restart), the next request
    opens another, asks the server where the file stands and goes on from there."""
    import http.client

    folder = tmp_path / "data"
    folder.mkdir()
    data = b"z" * (17 * 1024 * 1024)
    (folder / "big.bin").write_bytes(data)
    _token, key = ApiToken.issue(alice, "cli")
    monkeypatch.setenv("GPUPOOL_TOKEN", key)
    cli = _cli()
    monkeypatch.setattr(cli.time, "sleep", lambda seconds: None)
    real_getresponse = http.client.HTTPConnection.getresponse
    broken, connections = [], set()

    def dropping(self):
        connections.add(id(self))
        if self._method == "PATCH" and not broken:
            broken.append(True)
            self.sock.close()
            raise ConnectionResetError("reset by peer")
        return real_getresponse(self)

    monkeypatch.setattr(http.client.HTTPConnection, "getresponse", dropping)
    assert cli.main([live_server.url, str(photos.pk), str(folder)]) == 0
    assert broken and len(connections) == 2  # one before the break, one after
    version = DatasetVersion.objects.get()
    assert version.state == "ready" and version.size_bytes == len(data)


def test_a_large_file_goes_as_parts_at_once_resumes_them_and_is_joined(
    alice, photos, live_server, tmp_path, monkeypatch, eager_tasks
):
    """Over PART_MIN, a file is sent as --parallel parts on their own connections (tus
    concatenation); a run that breaks in one part is resumed part by part, then joined."""
    import threading

    folder = tmp_path / "data"
    folder.mkdir()
    data = bytes(range(256)) * (24 * 4096)  # 24 MiB: three parts of 8 MiB
    (folder / "big.bin").write_bytes(data)
    _token, key = ApiToken.issue(alice, "cli")
    monkeypatch.setenv("GPUPOOL_TOKEN", key)
    cli = _cli()
    monkeypatch.setattr(cli, "PART_MIN", 1024 * 1024)
    monkeypatch.setattr(cli, "CHUNK", 4 * 1024 * 1024)
    real_request = cli.Portal.request
    lock, threads_seen, first_part = threading.Lock(), set(), []

    def breaking(self, method, url, body=None, headers=None):
        """The first part's connection breaks after its first chunk; the others go on."""
        if method == "PATCH":
            with lock:
                threads_seen.add(threading.get_ident())
            if url.endswith(first_part[0]) and int(headers["Upload-Offset"]) > 0:
                raise RuntimeError("the laptop closed")
        answer = real_request(self, method, url, body, headers)
        if method == "POST" and (headers or {}).get("Upload-Concat") == "partial" and not first_part:
            first_part.append(answer[1]["Location"].rsplit("/", 1)[1])
        return answer

    monkeypatch.setattr(cli.Portal, "request", breaking)
    with pytest.raises(RuntimeError):
        cli.main([live_server.url, str(photos.pk), str(folder), "--parallel", "3"])
    assert len(threads_seen) == 3  # three connections at once
    parts = {upload.path: upload.offset for upload in Upload.objects.filter(partial=True)}
    assert parts["big.bin.part-1-of-3"] == 4 * 1024 * 1024  # broke after its first chunk
    assert parts["big.bin.part-2-of-3"] == parts["big.bin.part-3-of-3"] == 8 * 1024 * 1024

    sent = []
    monkeypatch.setattr(
        cli.Portal,
        "request",
        lambda self, m, u, b=None, h=None: (sent.append((m, h)), real_request(self, m, u, b, h))[1],
    )
    assert cli.main([live_server.url, str(photos.pk), str(folder), "--parallel", "3"]) == 0
    assert [int(h["Upload-Offset"]) for m, h in sent if m == "PATCH"] == [4 * 1024 * 1024]
    version = DatasetVersion.objects.get()
    expected = manifest_sha256([("big.bin", len(data), hashlib.sha256(data).hexdigest())])
    assert (version.state, version.sha256, version.file_count) == ("ready", expected, 1)
