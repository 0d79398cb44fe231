"""Registering data already on the pool's shared storage as a dataset version (admins).

An admin names a directory under one of DATASET_IMPORT_ROOTS; a worker copies every regular file
under it into the version's tree in the store, hashing as it copies, and the version is ready
with the same manifest and checksum an upload of the same files would give. Copied, not
referenced: the shared directory can change later, a version never does.

Shared storage is written by users' jobs, so it is hostile: the directory is walked one
component at a time with directory descriptors and O_NOFOLLOW, a symbolic link, a FIFO or a
device anywhere fails the version (naming it), each file is read at most the size it had when
opened, every relative path passes the upload's path rules (datasets.paths), and the whole must
fit the owner's quota and DATASET_MAX_FILES_PER_VERSION before a byte is copied."""

from __future__ import annotations

import hashlib
import os
import posixpath
import stat

from django.conf import settings

from datasets import storage
from datasets.paths import PathError, clean_relative_path

DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
BLOCK = 1024 * 1024


class ImportRefused(Exception):
    """Why a directory cannot be registered, in words for the admin."""


def check_source(path) -> str:
    """The normalised absolute path if it lies under an import root, else ImportRefused."""
    if not isinstance(path, str) or not path.startswith("/") or "\x00" in path:
        raise ImportRefused("Give an absolute path.")
    normal = posixpath.normpath(path)
    roots = [posixpath.normpath(root) for root in settings.DATASET_IMPORT_ROOTS]
    if not roots:
        raise ImportRefused("Registering from shared storage is off here (DATASET_IMPORT_ROOTS is empty).")
    if not any(normal == root or normal.startswith(root.rstrip("/") + "/") for root in roots):
        raise ImportRefused(f"The path must lie under {', '.join(roots)}.")
    return normal


def open_directory(path: str) -> int:
    """A descriptor of `path`, every component opened without following a link."""
    root = os.open("/", DIRECTORY)
    try:
        return storage.open_beneath(root, [part for part in path.split("/") if part])
    except OSError as exc:
        raise ImportRefused(f"{path}: {exc.filename} is not a directory one may enter ({exc.strerror}).") from None
    finally:
        os.close(root)


def scan(path: str, max_files: int) -> list[tuple[str, int]]:
    """(relative path, size) of every file under `path`, sorted; ImportRefused for a link, a
    special file, a path the rules refuse, or more than `max_files` files."""
    found: list[tuple[str, int]] = []

    def walk(fd: int, prefix: str) -> None:
        with os.scandir(fd) as entries:
            for entry in sorted(entries, key=lambda item: item.name):
                relative = f"{prefix}{entry.name}"
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    inner = os.open(entry.name, DIRECTORY, dir_fd=fd)
                    try:
                        walk(inner, relative + "/")
                    finally:
                        os.close(inner)
                elif stat.S_ISREG(info.st_mode):
                    try:
                        clean_relative_path(relative)
                    except PathError as exc:
                        raise ImportRefused(f"{relative}: {exc}") from None
                    found.append((relative, info.st_size))
                    if len(found) > max_files:
                        raise ImportRefused(f"More than {max_files} files.")
                else:
                    kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else "not a regular file"
                    raise ImportRefused(f"{relative} is {kind}; only regular files and folders are registered.")

    top = open_directory(path)
    try:
        walk(top, "")
    finally:
        os.close(top)
    if not found:
        raise ImportRefused(f"{path} holds no files.")
    return found


def copy_into_version(path: str, version_id: int, files: list[tuple[str, int]]) -> list[tuple[str, int, str]]:
    """Copy each file into the version's tree, hashing it; (path, size, sha256) of each."""
    result = []
    top = open_directory(path)
    try:
        for relative, size in files:
            source = storage.open_file_beneath(top, relative)
            try:
                if not stat.S_ISREG(os.fstat(source).st_mode):
                    raise ImportRefused(f"{relative} is no longer a regular file.")
                digest = hashlib.sha256()
                with storage.version_file_writer(version_id, relative) as write:
                    position = 0
                    while position < size:
                        block = os.pread(source, min(BLOCK, size - position), position)
                        if not block:
                            raise ImportRefused(f"{relative} shrank while it was copied.")
                        write(block)
                        digest.update(block)
                        position += len(block)
            finally:
                os.close(source)
            result.append((relative, size, digest.hexdigest()))
    finally:
        os.close(top)
    return result
