"""Datasets' fixtures: a store of each test's own, alice's dataset, and tus calls by API token."""

import base64
import hashlib

import pytest

from datasets import actions

TUS = {"HTTP_TUS_RESUMABLE": "1.0.0"}


@pytest.fixture(autouse=True)
def store(settings, tmp_path):
    settings.DATASET_STORE = tmp_path / "store"
    return settings.DATASET_STORE


@pytest.fixture
def photos(alice):
    return actions.create_dataset(alice, name="photos", description="holiday pictures")


def metadata(**values) -> str:
    return ",".join(f"{key} {base64.b64encode(value.encode()).decode()}" for key, value in values.items())


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class TusClient:
    """The tus calls of one user's API client on one version."""

    def __init__(self, client, dataset_id: int, number: int):
        self.client = client
        self.base = f"/api/v1/datasets/{dataset_id}/versions/{number}"

    def create(self, path: str, length: int, digest: str | None = None, **headers):
        fields = {"path": path, **({"sha256": digest} if digest else {})}
        return self.client.post(
            f"{self.base}/uploads/",
            HTTP_UPLOAD_LENGTH=str(length),
            HTTP_UPLOAD_METADATA=metadata(**fields),
            **{**TUS, **headers},
        )

    def patch(self, url: str, offset: int, data: bytes, **headers):
        return self.client.generic(
            "PATCH",
            url,
            data,
            content_type="application/offset+octet-stream",
            **{**TUS, "HTTP_UPLOAD_OFFSET": str(offset), **headers},
        )

    def head(self, url: str):
        return self.client.head(url, **TUS)

    def upload(self, path: str, data: bytes, digest: str | None = None, chunk: int = 4096) -> str:
        created = self.create(path, len(data), digest if digest is not None else sha256(data))
        assert created.status_code == 201, created.content
        url = created["Location"]
        for start in range(0, len(data), chunk):
            answer = self.patch(url, start, data[start : start + chunk])
            assert answer.status_code == 204, answer.content
        return url

    def commit(self):
        return self.client.post(f"{self.base}/commit")


@pytest.fixture
def tus_for(api_client_for):
    def _tus(user, dataset, number=None):
        client = api_client_for(user)
        if number is None:
            opened = client.post(f"/api/v1/datasets/{dataset.pk}/versions/")
            assert opened.status_code == 201, opened.content
            number = opened.json()["number"]
        return TusClient(client, dataset.pk, number)

    return _tus


READY_FILES = {"train/a.bin": b"A" * 3000, "README": b"hello\n"}


@pytest.fixture
def ready(alice, photos, tus_for, eager_tasks):
    """alice's photos v1, uploaded over tus and verified: READY_FILES."""
    from datasets.models import DatasetVersion, VersionState

    tus = tus_for(alice, photos)
    for path, data in READY_FILES.items():
        tus.upload(path, data)
    assert tus.commit().status_code == 202
    version = DatasetVersion.objects.get(dataset=photos)
    assert version.state == VersionState.READY
    return version
