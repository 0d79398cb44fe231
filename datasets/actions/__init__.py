"""Every write to datasets: atomic, audited where a person decided something (a dataset, a
version opened, committed, abandoned), state changes by conditional UPDATE. A committed
version is announced on commit (`version_committed`); datasets.receivers enqueues its
verification, which calls back `mark_ready` or `mark_failed` here. Views, the API and the
task call these."""

from __future__ import annotations

import os
from collections.abc import Callable

from django.conf import settings
from django.db import DatabaseError, IntegrityError, transaction
from django.db.models import Max
from django.utils import timezone

from accounts.access import is_admin
from accounts.models import Profile
from audit.log import record
from datasets import importing, storage
from datasets.manifest import manifest_sha256
from datasets.models import NAME, Dataset, DatasetFile, DatasetVersion, NodeCopy, NodePin, Upload, VersionState
from datasets.over_quota import may_delete_versions
from datasets.paths import PathError, clashes, clean_relative_path
from datasets.queries import DatasetError, may_write
from datasets.quota import describe, quota_bytes, quota_refusal, used_bytes
from datasets.signals import version_committed
from foundation.words import counted
from groups.models import Group
from groups.queries import membership

MAX_DESCRIPTION_CHARS = 2000

# Why a version must stay, from layers above this one (jobs: queued or running jobs mount it),
# registered from their AppConfig.ready(): check(version) -> a reason, or "" when it may go.
# Each runs inside the deletion's transaction, with the version's row locked.
_deletion_checks: dict[str, Callable[[DatasetVersion], str]] = {}


def register_deletion_check(name: str, check: Callable[[DatasetVersion], str]) -> None:
    _deletion_checks[name] = check


def _target(dataset: Dataset) -> str:
    return f"dataset:{dataset.pk}"


def create_dataset(actor, *, name, description="", group_id=None) -> Dataset:
    """A new dataset of `actor`, or of a group they are an active member of."""
    if not isinstance(name, str) or not isinstance(description, str):
        raise DatasetError("name" if not isinstance(name, str) else "description", "Must be a string.")
    name = name.strip()
    try:
        NAME(name)
    except Exception as exc:  # ValidationError
        raise DatasetError("name", exc.messages[0]) from None
    if len(description) > MAX_DESCRIPTION_CHARS:
        raise DatasetError("description", f"At most {MAX_DESCRIPTION_CHARS} characters.")
    group = None
    if group_id is not None:
        found = membership(actor, group_id) if isinstance(group_id, int) and not isinstance(group_id, bool) else None
        if found is None or found.group.closed_at is not None:
            raise DatasetError("group", "You are not a member of an open group with that id.")
        group = found.group
    dataset = Dataset(user=None if group else actor, group=group, name=name, description=description, created_by=actor)
    try:
        with transaction.atomic():
            dataset.save()
            record(actor, "dataset.create", _target(dataset), after={"name": name, "group": group_id})
    except IntegrityError:
        raise DatasetError("name", "A dataset of that name exists already.", 409) from None
    return dataset


def open_version(dataset: Dataset, actor) -> DatasetVersion:
    """The dataset's next version, open for uploads. One version is open at a time."""
    if not may_write(actor, dataset):
        raise DatasetError("dataset", "Only the dataset's owner or its group's members add versions.", 403)
    try:
        with transaction.atomic():
            # The dataset's row orders two openings, so each reads the other's number.
            Dataset.objects.select_for_update().get(pk=dataset.pk)
            number = (dataset.versions.aggregate(last=Max("number"))["last"] or 0) + 1
            version = DatasetVersion.objects.create(dataset=dataset, number=number, created_by=actor)
            record(actor, "dataset.version.open", _target(dataset), after={"version": number})
    except IntegrityError:
        open_one = dataset.versions.filter(state__in=[VersionState.UPLOADING, VersionState.VERIFYING]).first()
        number = open_one.number if open_one else "?"
        raise DatasetError(
            "version", f"Version {number} is still open: commit or abandon it before opening another.", 409
        ) from None
    return version


def _lock_owner(dataset: Dataset) -> None:
    """Quota checks of one owner run one after another: two uploads at once each see the other."""
    if dataset.group_id is not None:
        Group.objects.select_for_update().get(pk=dataset.group_id)
    else:
        Profile.objects.select_for_update().filter(user_id=dataset.user_id).first()


def _clean_path(path: str) -> str:
    try:
        return clean_relative_path(path)
    except PathError as exc:
        raise DatasetError("path", str(exc)) from None


def _check_clash(locked: DatasetVersion, path: str) -> None:
    live = list(
        locked.uploads.exclude(state=Upload.State.ABANDONED).filter(partial=False).values_list("path", flat=True)
    )
    other = clashes(path, live)
    if other is not None:
        message = "That path is in this version already." if other == path else f"It clashes with {other!r}."
        raise DatasetError("path", message, 409)


def create_upload(
    version: DatasetVersion, actor, *, path, length: int, declared_sha256: str = "", partial: bool = False
) -> Upload:
    """A tus upload resource for one file of an open version, or (`partial`) for one part of a
    file (tus concatenation: `concatenate_parts` makes the file). Refused before any byte: a bad
    path, one already in the version, a version not open, and the owner's quota (parts count
    against it as files do)."""
    dataset = version.dataset
    check_writer(dataset, actor)
    path = _clean_path(path) if path or not partial else ""
    with transaction.atomic():
        _lock_owner(dataset)
        locked = DatasetVersion.objects.select_for_update().get(pk=version.pk)
        if locked.state != VersionState.UPLOADING:
            raise DatasetError("version", f"Version {locked.number} is {locked.state}: it takes no more files.", 409)
        if locked.uploads.exclude(state=Upload.State.ABANDONED).count() >= settings.DATASET_MAX_FILES_PER_VERSION:
            raise DatasetError("path", f"A version holds at most {settings.DATASET_MAX_FILES_PER_VERSION} files.", 409)
        if not partial:
            _check_clash(locked, path)
        allowed, used = quota_bytes(dataset), used_bytes(dataset)
        if used + length > allowed:
            why = quota_refusal(dataset)
            raise DatasetError(
                "quota",
                why
                or f"Over the NVMe quota: {describe(allowed)} allowed, {describe(used)} used or reserved, "
                f"and this file is {describe(length)}. Remove a dataset or upgrade the plan.",
                413,
            )
        upload = Upload.objects.create(
            version=locked,
            path=path,
            length=length,
            declared_sha256="" if partial else declared_sha256,
            partial=partial,
            created_by=actor,
            state=Upload.State.COMPLETE if length == 0 else Upload.State.RECEIVING,
        )
        storage.create_staged(upload.pk)
    return upload


MAX_PARTS = 64


def concatenate_parts(version: DatasetVersion, actor, *, path, part_ids: list, declared_sha256: str = "") -> Upload:
    """tus concatenation's final upload: the complete parts, in the order given, become one file
    of the version at `path` (copied in the kernel, then the parts are gone). Their bytes were
    counted against the quota already and stay counted, now as the file's. Refused, changing
    nothing: a part that is not a complete part of this version, one given twice, a path taken."""
    dataset = version.dataset
    check_writer(dataset, actor)
    path = _clean_path(path)
    if not 1 <= len(part_ids) <= MAX_PARTS or len(set(part_ids)) != len(part_ids):
        raise DatasetError("parts", f"Name 1 to {MAX_PARTS} different parts.")
    with transaction.atomic():
        locked = DatasetVersion.objects.select_for_update().get(pk=version.pk)
        if locked.state != VersionState.UPLOADING:
            raise DatasetError("version", f"Version {locked.number} is {locked.state}: it takes no more files.", 409)
        try:
            found = {
                str(part.pk): part
                for part in Upload.objects.select_for_update(nowait=True)
                .filter(pk__in=part_ids, version=locked, partial=True)
                .exclude(state=Upload.State.ABANDONED)
            }
        except DatabaseError:
            raise DatasetError("parts", "A part is still receiving bytes.", 409) from None
        missing = [str(part_id) for part_id in part_ids if str(part_id) not in found]
        if missing:
            raise DatasetError("parts", f"Not a part of this version: {missing[0]}.")
        parts = [found[str(part_id)] for part_id in part_ids]
        unfinished = next((part for part in parts if part.state != Upload.State.COMPLETE), None)
        if unfinished is not None:
            raise DatasetError(
                "parts", f"Part {unfinished.pk} holds {unfinished.offset} of its {unfinished.length} bytes.", 409
            )
        _check_clash(locked, path)
        length = sum(part.length for part in parts)
        final = Upload.objects.create(
            version=locked,
            path=path,
            length=length,
            offset=length,
            declared_sha256=declared_sha256,
            created_by=actor,
            state=Upload.State.COMPLETE,
        )
        try:
            storage.concatenate(final.pk, [(part.pk, part.length) for part in parts])
        except storage.StorageError as exc:
            raise DatasetError("parts", str(exc), 409) from None
        ids = [part.pk for part in parts]
        Upload.objects.filter(pk__in=ids).update(state=Upload.State.ABANDONED)
        transaction.on_commit(lambda: storage.remove_staged(ids))
    return final


def check_writer(dataset: Dataset, actor) -> None:
    if not may_write(actor, dataset):
        raise DatasetError("dataset", "Only the dataset's owner or its group's members upload to it.", 403)


def receive_chunk(upload: Upload, actor, *, offset: int, stream, checksum=None, writer_checked=False) -> int:
    """Write one PATCH body at `offset`, which must be where the upload stands; returns the new
    offset. `checksum`: (algorithm, expected hex) from Upload-Checksum. The upload's row is
    locked without waiting, so a second writer of the same upload is refused at once (409)
    rather than interleaving its bytes; other uploads are untouched. `writer_checked`: the
    caller found the upload among the datasets `actor` may write (one query fewer a chunk)."""
    if not writer_checked:
        check_writer(upload.version.dataset, actor)
    with transaction.atomic():
        try:
            # The upload's row alone: locking its version's too (FOR UPDATE of a join) refused every
            # other file of the version sent at the same time (409).
            uploads = Upload.objects.select_for_update(nowait=True, of=("self",)).select_related("version")
            locked = uploads.get(pk=upload.pk)
        except DatabaseError:
            raise DatasetError("offset", "Another request is writing this upload.", 409) from None
        if locked.version.state != VersionState.UPLOADING or locked.state == Upload.State.ABANDONED:
            raise DatasetError("upload", "This upload's version takes no more bytes.", 409)
        if offset != locked.offset:
            raise DatasetError("offset", f"The upload stands at {locked.offset}, not {offset}.", 409)
        algorithm, expected = checksum or (None, "")
        try:
            written, digest = storage.write_at(locked.pk, offset, stream, locked.length - offset, algorithm)
        except storage.StorageError as exc:
            raise DatasetError("length", str(exc), 413) from None
        if algorithm and digest != expected:
            raise DatasetError("checksum", "The chunk's checksum does not match Upload-Checksum.", 460)
        new_offset = offset + written
        state = Upload.State.COMPLETE if new_offset == locked.length else Upload.State.RECEIVING
        Upload.objects.filter(pk=locked.pk, offset=offset).update(offset=new_offset, state=state)
    return new_offset


def commit_version(version: DatasetVersion, actor) -> DatasetVersion:
    """Close an open version for verification (datasets.tasks.verify_version, enqueued on
    commit). A version already verifying is enqueued again: a worker that died mid-check
    leaves it there, and the check is idempotent."""
    if not may_write(actor, version.dataset):
        raise DatasetError("dataset", "Only the dataset's owner or its group's members commit its versions.", 403)
    with transaction.atomic():
        locked = DatasetVersion.objects.select_for_update().get(pk=version.pk)
        if locked.state == VersionState.UPLOADING:
            try:
                uploads = list(locked.uploads.select_for_update(nowait=True).exclude(state=Upload.State.ABANDONED))
            except DatabaseError:
                raise DatasetError("version", "An upload is still receiving bytes.", 409) from None
            # Parts no final upload joined are no file of the version: they go.
            strays = [upload.pk for upload in uploads if upload.partial]
            uploads = [upload for upload in uploads if not upload.partial]
            if not uploads:
                raise DatasetError("version", "A version needs at least one file.", 409)
            if strays:
                Upload.objects.filter(pk__in=strays).update(state=Upload.State.ABANDONED)
                transaction.on_commit(lambda: storage.remove_staged(strays))
            unfinished = [upload for upload in uploads if upload.state != Upload.State.COMPLETE]
            if unfinished:
                first = unfinished[0]
                raise DatasetError(
                    "version",
                    f"{counted(len(unfinished), 'file')} not fully uploaded, e.g. {first.path} ({first.offset} of "
                    f"{first.length} bytes).",
                    409,
                )
            DatasetVersion.objects.filter(pk=locked.pk, state=VersionState.UPLOADING).update(
                state=VersionState.VERIFYING, committed_at=timezone.now()
            )
            record(actor, "dataset.version.commit", _target(version.dataset), after={"version": locked.number})
        elif locked.state != VersionState.VERIFYING:
            raise DatasetError("version", f"Version {locked.number} is {locked.state} already.", 409)
        transaction.on_commit(lambda: version_committed.send(sender=DatasetVersion, version_id=locked.pk))
    return DatasetVersion.objects.get(pk=version.pk)


def abandon_version(version: DatasetVersion, actor) -> DatasetVersion:
    """Give up an open version: it becomes failed and its staged bytes are removed."""
    if not may_write(actor, version.dataset):
        raise DatasetError("dataset", "Only the dataset's owner or its group's members abandon its versions.", 403)
    with transaction.atomic():
        changed = DatasetVersion.objects.filter(pk=version.pk, state=VersionState.UPLOADING).update(
            state=VersionState.FAILED, error="Abandoned before it was committed."
        )
        if not changed:
            raise DatasetError("version", "Only a version still uploading can be abandoned.", 409)
        ids = list(version.uploads.values_list("pk", flat=True))
        version.uploads.update(state=Upload.State.ABANDONED)
        record(actor, "dataset.version.abandon", _target(version.dataset), after={"version": version.number})
        transaction.on_commit(lambda: storage.remove_staged(ids))
    return DatasetVersion.objects.get(pk=version.pk)


def delete_version(version: DatasetVersion, actor) -> DatasetVersion:
    """Delete a ready version: its bytes leave the store and the owner's quota at once; its row,
    files and checksums stay for the jobs that ran on it. Refused (409, nothing changed) while a
    queued or running job mounts it, or while it is pinned to nodes. Copies in nodes' caches
    are forgotten here (their `ds_<id>` features go with the next feature sync) and are the
    first their node's tool evicts, since no job asks for them again."""
    if not may_delete_versions(actor, version.dataset):
        raise DatasetError("dataset", "Only the dataset's owner or its group's members delete its versions.", 403)
    with transaction.atomic():
        locked = DatasetVersion.objects.select_for_update().get(pk=version.pk)
        if locked.state != VersionState.READY:
            raise DatasetError(
                "version", f"Version {locked.number} is {locked.state}; only a ready one is deleted.", 409
            )
        pinned = sorted(NodePin.objects.filter(version=locked).values_list("node", flat=True))
        if pinned:
            raise DatasetError(
                "version", f"Version {locked.number} is pinned to {', '.join(pinned)}; an admin unpins it first.", 409
            )
        for check in list(_deletion_checks.values()):
            reason = check(locked)
            if reason:
                raise DatasetError("version", reason, 409)
        when = timezone.now()
        DatasetVersion.objects.filter(pk=locked.pk, state=VersionState.READY).update(
            state=VersionState.DELETED, error=f"Deleted by {actor.username} on {when:%Y-%m-%d %H:%M} UTC."
        )
        NodeCopy.objects.filter(version=locked).delete()
        record(
            actor,
            "dataset.version.delete",
            _target(version.dataset),
            before={"version": locked.number, "size_bytes": locked.size_bytes, "sha256": locked.sha256},
        )
        transaction.on_commit(lambda: storage.remove_tree(locked.pk))
    return DatasetVersion.objects.get(pk=version.pk)


def register_version(dataset: Dataset, actor, *, path) -> DatasetVersion:
    """An admin registers a directory of the pool's shared storage as the dataset's next version
    (datasets/importing.py): checked to lie under DATASET_IMPORT_ROOTS and to be a directory,
    then a worker copies and hashes it (the version is `verifying` until then)."""
    if not is_admin(actor):
        raise DatasetError("path", "Only admins register data from shared storage.", 403)
    try:
        source = importing.check_source(path)
        os.close(importing.open_directory(source))
    except importing.ImportRefused as exc:
        raise DatasetError("path", str(exc)) from None
    try:
        with transaction.atomic():
            Dataset.objects.select_for_update().get(pk=dataset.pk)
            number = (dataset.versions.aggregate(last=Max("number"))["last"] or 0) + 1
            version = DatasetVersion.objects.create(
                dataset=dataset,
                number=number,
                created_by=actor,
                state=VersionState.VERIFYING,
                committed_at=timezone.now(),
                source_path=source,
            )
            record(actor, "dataset.version.register", _target(dataset), after={"version": number, "path": source})
            transaction.on_commit(lambda: version_committed.send(sender=DatasetVersion, version_id=version.pk))
    except IntegrityError:
        raise DatasetError("version", "A version is still open: commit or abandon it first.", 409) from None
    return version


def reserve_import(version_id: int, size: int, file_count: int) -> None:
    """Before a registered version's bytes are copied: its size counts against the owner's
    quota, or DatasetError (413) says why it does not fit."""
    with transaction.atomic():
        version = DatasetVersion.objects.select_related("dataset").get(pk=version_id)
        _lock_owner(version.dataset)
        others = used_bytes(version.dataset) - (version.size_bytes if version.state == VersionState.VERIFYING else 0)
        allowed = quota_bytes(version.dataset)
        if others + size > allowed:
            raise DatasetError(
                "path",
                quota_refusal(version.dataset)
                or f"Over the NVMe quota: {describe(allowed)} allowed, {describe(others)} used or reserved, and this "
                f"directory holds {describe(size)}.",
                413,
            )
        DatasetVersion.objects.filter(pk=version_id, state=VersionState.VERIFYING).update(
            size_bytes=size, file_count=file_count
        )


def mark_ready(version_id: int, files: list[tuple[str, int, str]]) -> bool:
    """Verified: the version is ready with its files (path, size, sha256). False when another
    run got there first (it stays as that run left it)."""
    with transaction.atomic():
        changed = DatasetVersion.objects.filter(pk=version_id, state=VersionState.VERIFYING).update(
            state=VersionState.READY,
            size_bytes=sum(size for _path, size, _sha in files),
            file_count=len(files),
            sha256=manifest_sha256(files),
            ready_at=timezone.now(),
            error="",
        )
        if changed:
            DatasetFile.objects.bulk_create(
                DatasetFile(version_id=version_id, path=path, size_bytes=size, sha256=sha) for path, size, sha in files
            )
            version = DatasetVersion.objects.select_related("dataset").get(pk=version_id)
            record(None, "dataset.version.ready", _target(version.dataset), after={"version": version.number})
    return bool(changed)


def mark_failed(version_id: int, error: str) -> bool:
    """A check failed: the version is failed with why, and its bytes are removed."""
    with transaction.atomic():
        changed = DatasetVersion.objects.filter(pk=version_id, state=VersionState.VERIFYING).update(
            state=VersionState.FAILED, error=error[:4000]
        )
        if changed:
            ids = list(Upload.objects.filter(version_id=version_id).values_list("pk", flat=True))
            Upload.objects.filter(version_id=version_id).update(state=Upload.State.ABANDONED)
            version = DatasetVersion.objects.select_related("dataset").get(pk=version_id)
            record(
                None, "dataset.version.fail", _target(version.dataset), after={"version": version.number}, reason=error
            )

            def remove():
                storage.remove_staged(ids)
                storage.remove_tree(version_id)

            transaction.on_commit(remove)
    return bool(changed)
