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
