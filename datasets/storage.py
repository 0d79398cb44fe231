"""The dataset store on disk (settings.DATASET_STORE):

    staging/<upload uuid>              an upload's bytes while it is received
    versions/<version id>/<path>       a verified version's files, as a tree
    versions/<version id>.manifest     its files' sha256, sizes and paths (the nodes check copies)
    grants/<job uuid>                  what one job may stage on its node
    pins/<node>                        the copies an admin pinned on that node

A user's path never names a staged file: staged files are named by the upload's random id.
Paths (already checked by datasets.paths) name files only when a verified version's files
are moved into its tree, and that tree is walked one component at a time with directory file
descriptors and O_NOFOLLOW, so a symlink planted anywhere in it is refused, not followed."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from pathlib import Path

from django.conf import settings

READ_BLOCK = 1024 * 1024
NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# tus checksum extension: the algorithms a client may name in Upload-Checksum.
CHECKSUM_ALGORITHMS = ("sha1", "sha256", "md5")


class StorageError(Exception):
    """The store refused (a symlink, a file of the wrong size, a missing file)."""


def _root() -> Path:
    return Path(settings.DATASET_STORE)


@contextmanager
def _directory(*parts: str, create: bool = True):
    """A file descriptor of DATASET_STORE/<parts...>, made (mode 750) where missing; no part is
    followed through a symlink."""
    root = _root()
    if create:
        root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o750, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                inner = os.open(part, DIRECTORY, dir_fd=fd)
            except OSError as exc:
                raise StorageError(f"{part}: {exc.strerror}") from None
            os.close(fd)
            fd = inner
        yield fd
    finally:
        os.close(fd)


def _staged_name(upload_id) -> str:
    # A UUID's hex: never a user's word.
    return str(upload_id).replace("-", "")


def create_staged(upload_id) -> None:
    """An empty staging file for a new upload; refused if one exists (O_EXCL)."""
    with _directory("staging") as staging:
        fd = os.open(
            _staged_name(upload_id),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o640,
            dir_fd=staging,
        )
        os.close(fd)


def write_at(upload_id, offset: int, stream, most: int, checksum_algorithm: str | None = None) -> tuple[int, str]:
    """Copy the body `stream` into the upload's staging file at `offset`, at most `most` bytes.
    Returns (bytes written, hex digest of them in `checksum_algorithm` or ""); StorageError
    when the body holds more than `most` (what was written stays beyond the recorded offset,
    where the next write at that offset replaces it)."""
    digest = hashlib.new(checksum_algorithm) if checksum_algorithm else None
    written = 0
    with _directory("staging") as staging:
        fd = os.open(_staged_name(upload_id), os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=staging)
        try:
            while True:
                block = stream.read(min(READ_BLOCK, most - written + 1))
                if not block:
                    break
                if written + len(block) > most:
                    raise StorageError("The body is longer than the rest of the upload.")
                os.pwrite(fd, block, offset + written)
                written += len(block)
                if digest is not None:
                    digest.update(block)
        finally:
            os.close(fd)
    return written, digest.hexdigest() if digest else ""


def _sha256_of_fd(fd: int, expected_size: int) -> str:
    """The sha256 of the first `expected_size` bytes; StorageError when the file holds fewer."""
    digest = hashlib.sha256()
    position = 0
    while position < expected_size:
        block = os.pread(fd, min(READ_BLOCK, expected_size - position), position)
        if not block:
            raise StorageError(f"The file holds {position} bytes, not {expected_size}.")
        digest.update(block)
        position += len(block)
    return digest.hexdigest()


def open_beneath(start: int, parts, *, create: bool = False) -> int:
    """A new descriptor of start/<parts...>, each part opened without following a link (and
    made, mode 750, where missing with `create`); OSError, its `filename` the part, otherwise.
    The store's trees and (datasets/importing.py) users' shared directories are walked with it."""
    fd = os.dup(start)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o750, dir_fd=fd)
                except FileExistsError:
                    pass
            inner = os.open(part, DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file_beneath(start: int, path: str) -> int:
    """A read descriptor of start/<path>, no component (the file included) followed through a link."""
    *folders, leaf = path.split("/")
    fd = open_beneath(start, folders)
    try:
        return os.open(leaf, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
    finally:
        os.close(fd)


def _open_in_tree(version_id: int, path: str) -> int:
    """A read descriptor of a verified version's file, each component opened without
    following a symlink."""
    with _directory("versions", str(version_id), create=False) as top:
        return open_file_beneath(top, path)


def sha256_of_upload(upload_id, version_id: int, path: str, size: int) -> str:
    """The sha256 of an upload's bytes: in staging, or (a verification run before this one
    moved it) already in the version's tree. Streamed, a block at a time."""
    try:
        with _directory("staging", create=False) as staging:
            fd = os.open(_staged_name(upload_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=staging)
    except (FileNotFoundError, StorageError):
        try:
            fd = _open_in_tree(version_id, path)
        except OSError as exc:
            raise StorageError(f"{path}: its bytes are missing ({exc.strerror}).") from None
    try:
        return _sha256_of_fd(fd, size)
    finally:
        os.close(fd)


def move_into_tree(upload_id, version_id: int, path: str, size: int) -> None:
    """Move a verified upload from staging to versions/<id>/<path>, cut to its declared size.
    Idempotent: an upload already moved is left alone."""
    *folders, leaf = path.split("/")
    with _directory("staging") as staging, _directory("versions", str(version_id)) as top:
        fd = open_beneath(top, folders, create=True)
        try:
            try:
                staged = os.open(_staged_name(upload_id), os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=staging)
            except FileNotFoundError:
                return  # moved by an earlier run
            try:
                os.ftruncate(staged, size)
                os.fsync(staged)
            finally:
                os.close(staged)
            os.rename(_staged_name(upload_id), leaf, src_dir_fd=staging, dst_dir_fd=fd)
        finally:
            os.close(fd)


def concatenate(final_id, parts: list[tuple[object, int]]) -> None:
    """The final upload's staged file: the parts' staged files (each of the length given) one
    after another, copied by the kernel (copy_file_range). StorageError, and no final file,
    when a part's file is missing or not its length."""
    with _directory("staging") as staging:
        name = _staged_name(final_id)
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640, dir_fd=staging)
        try:
            for part_id, length in parts:
                try:
                    source = os.open(_staged_name(part_id), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=staging)
                except OSError as exc:
                    raise StorageError(f"part {part_id}: {exc.strerror}") from None
                try:
                    if os.fstat(source).st_size != length:
                        raise StorageError(f"part {part_id} is not {length} bytes on disk")
                    copied = 0
                    while copied < length:
                        step = os.copy_file_range(source, out, length - copied)
                        if step == 0:
                            raise StorageError(f"part {part_id} ended early")
                        copied += step
                finally:
                    os.close(source)
        except BaseException:
            os.close(out)
            os.unlink(name, dir_fd=staging)
            raise
        os.close(out)


def remove_staged(upload_ids) -> None:
    try:
        with _directory("staging", create=False) as staging:
            for upload_id in upload_ids:
                try:
                    os.unlink(_staged_name(upload_id), dir_fd=staging)
                except FileNotFoundError:
                    pass
    except (FileNotFoundError, StorageError):
        pass


def remove_tree(version_id: int) -> None:
    """A failed version's partly moved tree, or a deleted version's (shutil.rmtree does not follow
    symlinks on Linux)."""
    shutil.rmtree(_root() / "versions" / str(version_id), ignore_errors=True)


def version_directory(version_id: int) -> Path:
    return _root() / "versions" / str(version_id)


def _write_whole(directory: str, name: str, text: str, mode: int) -> None:
    """DATASET_STORE/<directory>/<name> holding exactly `text`: written under a temporary name,
    synced, then renamed over, so a reader (the nodes' root tool) never sees half of it."""
    temporary = f".{name}.{os.getpid()}.tmp"
    with _directory(directory) as folder:
        fd = os.open(
            temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=folder
        )
        try:
            os.write(fd, text.encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)


def write_manifest(version_id: int, text: str) -> None:
    """versions/<id>.manifest: the version's manifest (datasets/manifest.py), which the nodes
    check every copied file against."""
    _write_whole("versions", f"{int(version_id)}.manifest", text, 0o640)


def manifest_sha256(version_id: int) -> str:
    """The sha256 of versions/<id>.manifest as it is on disk, "" when there is none."""
    try:
        with _directory("versions", create=False) as folder:
            fd = os.open(f"{int(version_id)}.manifest", os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=folder)
    except (OSError, StorageError):
        return ""
    try:
        digest = hashlib.sha256()
        while block := os.read(fd, READ_BLOCK):
            digest.update(block)
        return digest.hexdigest()
    finally:
        os.close(fd)


def write_grant(job_uuid: str, text: str) -> None:
    """grants/<job uuid>: what one job may stage on its node (datasets/actions/node_cache.py)."""
    _write_whole("grants", str(uuid.UUID(str(job_uuid))), text, 0o640)


def remove_grant(job_uuid: str) -> None:
    try:
        with _directory("grants", create=False) as folder:
            os.unlink(str(uuid.UUID(str(job_uuid))), dir_fd=folder)
    except (FileNotFoundError, StorageError):
        pass


def write_pins(node: str, text: str) -> None:
    """pins/<node>: the sha256 of each copy the node's tool must keep (datasets/actions/node_cache.py)."""
    if not NODE_NAME.match(node):
        raise StorageError(f"not a node name: {node!r}")
    _write_whole("pins", node, text, 0o640)


def open_version_file(version_id: int, path: str) -> int:
    """A read descriptor of a ready version's file (no link followed anywhere in its path);
    StorageError when it is missing."""
    try:
        return _open_in_tree(version_id, path)
    except OSError as exc:
        raise StorageError(f"{path}: {exc.strerror}") from None


@contextmanager
def version_file_writer(version_id: int, path: str):
    """A writer of versions/<id>/<path> (folders made, no link followed): yields a function
    taking blocks; the file appears under its name only when the block is complete."""
    *folders, leaf = path.split("/")
    with _directory("versions", str(int(version_id))) as top:
        fd = open_beneath(top, folders, create=True)
        try:
            temporary = f".{leaf[:200]}.{os.getpid()}.part"
            out = os.open(
                temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o640, dir_fd=fd
            )
            try:
                yield lambda block: _write_all(out, block)
                os.fsync(out)
            except BaseException:
                os.close(out)
                os.unlink(temporary, dir_fd=fd)
                raise
            os.close(out)
            os.rename(temporary, leaf, src_dir_fd=fd, dst_dir_fd=fd)
        finally:
            os.close(fd)


def _write_all(fd: int, block: bytes) -> None:
    view = memoryview(block)
    while view:
        view = view[os.write(fd, view) :]
