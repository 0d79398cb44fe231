"""Verifying a committed version on a worker: every file read back from disk, a block at a
time, its sha256 compared with what the client declared; then the files move into the
version's tree and the version is ready. Takes the version's id, re-reads it, and does
nothing unless it is `verifying`, so running twice (or at once) is safe."""

from __future__ import annotations

from celery import shared_task

from datasets import actions, node_cache, storage
from datasets.models import DatasetVersion, Upload, VersionState


@shared_task(ignore_result=True)
def verify_version(version_id: int) -> str:
    version = DatasetVersion.objects.filter(pk=version_id).first()
    if version is None or version.state != VersionState.VERIFYING:
        return version.state if version else "missing"
    uploads = list(Upload.objects.filter(version_id=version_id, state=Upload.State.COMPLETE).order_by("path"))
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


@shared_task(ignore_result=True)
def sync_node_features(node: str) -> bool:
    """A node's ds_<version> features after its cache changed (datasets/node_cache.py)."""
    return node_cache.sync_node_features(node)


@shared_task(ignore_result=True)
def sync_all_node_features() -> int:
    return node_cache.sync_all_node_features()
