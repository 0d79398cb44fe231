"""Verifying a committed version on a worker: every file read back from disk, a block at a
time, its sha256 compared with what the client declared; then the files move into the
version's tree and the version is ready. Takes the version's id, re-reads it, and does
nothing unless it is `verifying`, so running twice (or at once) is safe."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from datasets import actions, importing, over_quota, storage
from datasets.actions import node_cache
from datasets.models import DatasetVersion, Upload, VersionState
from datasets.queries import DatasetError


@shared_task(ignore_result=True)
def verify_version(version_id: int) -> str:
    version = DatasetVersion.objects.filter(pk=version_id).first()
    if version is None or version.state != VersionState.VERIFYING:
        return version.state if version else "missing"
    if version.source_path:
        return _import_version(version)
    uploads = list(
        Upload.objects.filter(version_id=version_id, state=Upload.State.COMPLETE, partial=False).order_by("path")
    )
    files = []
    try:
        for upload in uploads:
            found = storage.sha256_of_upload(upload.pk, version_id, upload.path, upload.length)
            if upload.declared_sha256 and found != upload.declared_sha256:
                actions.mark_failed(
                    version_id,
                    f"{upload.path}: its sha256 on the server is {found}, not the declared {upload.declared_sha256}.",
                )
                return VersionState.FAILED
            files.append((upload.path, upload.length, found))
        for upload in uploads:
            storage.move_into_tree(upload.pk, version_id, upload.path, upload.length)
    except (storage.StorageError, OSError) as exc:
        actions.mark_failed(version_id, f"The uploaded files could not be read back: {exc}")
        return VersionState.FAILED
    actions.mark_ready(version_id, files)
    return VersionState.READY


def _import_version(version: DatasetVersion) -> str:
    """A version registered from shared storage: scanned, its size reserved in the quota,
    copied and hashed into the store (datasets/importing.py); run again, it starts over."""
    try:
        files = importing.scan(version.source_path, settings.DATASET_MAX_FILES_PER_VERSION)
        actions.reserve_import(version.pk, sum(size for _path, size in files), len(files))
        storage.remove_tree(version.pk)
        copied = importing.copy_into_version(version.source_path, version.pk, files)
    except (importing.ImportRefused, DatasetError) as exc:
        actions.mark_failed(version.pk, str(exc.message if isinstance(exc, DatasetError) else exc))
        return VersionState.FAILED
    except (storage.StorageError, OSError) as exc:
        actions.mark_failed(version.pk, f"{version.source_path} could not be copied: {exc}")
        return VersionState.FAILED
    actions.mark_ready(version.pk, copied)
    return VersionState.READY


@shared_task(ignore_result=True)
def sync_node_features(node: str) -> bool:
    """A node's ds_<version> features after its cache changed (datasets/actions/node_cache.py)."""
    return node_cache.sync_node_features(node)


@shared_task(ignore_result=True)
def sync_all_node_features() -> int:
    return node_cache.sync_all_node_features()


@shared_task(ignore_result=True)
def mark_over_quota() -> dict:
    """datasets/over_quota.py: owners over their quota marked and told once; cleared under it."""
    return over_quota.mark_over_quota()
