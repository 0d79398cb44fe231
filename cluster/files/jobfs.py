"""Opening and creating paths inside directories that users' jobs write to.

A job owns its directory and may swap any entry in it for a symlink at any moment, so
a path that was checked and then opened by name can lead anywhere by the time it is
opened. Everything here walks from a trusted root one component at a time, each opened
relative to the descriptor of its parent with O_NOFOLLOW: no symlink is ever followed
below the root, and what was checked is what is read or changed (by descriptor).

(`openat2` with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS would do the walk in one call, but
Python has no wrapper for it; the per-component walk works on every POSIX kernel.)

Pure OS code: no Django, so the worker, the web process and tests share it.
"""

from __future__ import annotations

import errno
import io
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

# O_PATH (Linux) needs only search permission on the directory, not read permission.
_WALK = getattr(os, "O_PATH", os.O_RDONLY) | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
_READ_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class UnsafePath(OSError):
    """The path is not (or no longer) what may be read or created: a symlink, not a
    regular file or directory, or owned by someone else. An OSError, so callers that
    treat a missing log as "no log" treat this the same."""


def check_component(name: str) -> str:
    if not name or name in {".", ".."} or "/" in name or "\0" in name:
        raise ValueError(f"invalid path component {name!r}")
    return name


@dataclass(frozen=True)
class Beneath:
    """A path as a trusted root and the components under it that are walked without
    following links. `str()` is for messages only: never open it by name."""

    root: Path
    parts: tuple[str, ...]

    def __post_init__(self):
        if not self.parts:
            raise ValueError("a path beneath the root needs at least one component")
        for part in self.parts:
            check_component(part)

    def __str__(self) -> str:
        return str(Path(self.root).joinpath(*self.parts))


def _open_root(root: Path) -> int:
    # The root comes from settings, not from a job: links above it are the operator's.
    return os.open(root, _WALK & ~os.O_NOFOLLOW)


def _open_child(parent_fd: int, name: str, flags: int, where: str) -> int:
    try:
        return os.open(name, flags, dir_fd=parent_fd)
    except OSError as exc:
        # O_NOFOLLOW on a symlink gives ELOOP; with O_DIRECTORY, ENOTDIR.
        if exc.errno in {errno.ELOOP, errno.ENOTDIR}:
            raise UnsafePath(exc.errno, f"{where} is a symlink or not a directory") from None
        raise


def _walk(root: Path, parts: Iterable[str]) -> int:
    """A descriptor of root/parts..., every part a real directory reached without links."""
    fd = _open_root(root)
    try:
        where = Path(root)
        for name in parts:
            where = where / check_component(name)
            child = _open_child(fd, name, _WALK, str(where))
            os.close(fd)
            fd = child
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_directory(location: Beneath) -> int:
    """A descriptor (O_PATH where the kernel has it) of a directory beneath the root;
    the caller closes it."""
    return _walk(location.root, location.parts)


def open_regular_file(location: Beneath, *, owner_uid: int) -> int:
    """A read-only descriptor of a regular file owned by `owner_uid` beneath the root;
    UnsafePath for a symlink anywhere below the root, a FIFO, a device, a directory, or
    a file of another uid (a job's hard link to a file it may not read). Never blocks."""
    parent = _walk(location.root, location.parts[:-1])
    try:
        fd = _open_child(parent, location.parts[-1], _READ_FILE, str(location))
    finally:
        os.close(parent)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise UnsafePath(errno.EINVAL, f"{location} is not a regular file")
        if info.st_uid != owner_uid:
            raise UnsafePath(errno.EPERM, f"{location} belongs to uid {info.st_uid}, not {owner_uid}")
        return fd
    except BaseException:
        os.close(fd)
        raise


@dataclass(frozen=True)
class Entry:
    """One entry of a listed directory, as lstat saw it: a link is listed, never followed."""

    name: str
    kind: str  # "file", "directory", "link" or "other" (a FIFO, a socket, a device)
    size: int
    modified: float  # seconds since the epoch


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    return "link" if stat.S_ISLNK(mode) else "other"


def list_directory(location: Beneath, *, owner_uid: int, limit: int) -> tuple[list[Entry], bool]:
    """The entries of a directory owned by `owner_uid` beneath the root, reached without links,
    at most `limit` of them (in the order the file system gives; True: there were more).
    UnsafePath for a link on the way or a directory of another uid."""
    parent = _walk(location.root, location.parts[:-1])
    try:
        fd = _open_child(
            parent, location.parts[-1], os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, str(location)
        )
    finally:
        os.close(parent)
    try:
        if os.fstat(fd).st_uid != owner_uid:
            raise UnsafePath(errno.EPERM, f"{location} does not belong to uid {owner_uid}")
        entries: list[Entry] = []
        with os.scandir(fd) as listing:
            for found in listing:
                if len(entries) == limit:
                    return entries, True
                try:
                    info = found.stat(follow_symlinks=False)
                except FileNotFoundError:
                    continue  # removed by the job while listed
                entries.append(Entry(found.name, _kind(info.st_mode), info.st_size, info.st_mtime))
        return entries, False
    finally:
        os.close(fd)


def read_at_most(fd: int, offset: int, count: int) -> bytes:
    """Up to `count` bytes from `offset`, however the file changes meanwhile."""
    chunks = []
    while count > 0:
        chunk = os.pread(fd, min(count, 1 << 20), offset)
        if not chunk:
            break
        chunks.append(chunk)
        offset += len(chunk)
        count -= len(chunk)
    return b"".join(chunks)


class BoundedReader(io.RawIOBase):
    """A file object over a descriptor that ends at `limit` bytes even if the file grows:
    a download sends the log as it was when it was opened, not whatever a job keeps
    appending. Seekable within [0, limit], so FileResponse can set Content-Length."""

    def __init__(self, fd: int, limit: int):
        super().__init__()
        self._fd = fd
        self._limit = limit
        self._position = 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def readinto(self, buffer) -> int:
        wanted = min(len(buffer), self._limit - self._position)
        if wanted <= 0:
            return 0
        data = os.pread(self._fd, wanted, self._position)
        buffer[: len(data)] = data
        self._position += len(data)
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._position, io.SEEK_END: self._limit}[whence]
        self._position = max(0, min(self._limit, base + offset))
        return self._position

    def tell(self) -> int:
        return self._position

    def close(self) -> None:
        if not self.closed:
            try:
                os.close(self._fd)
            finally:
                super().close()


def make_owned_directory(location: Beneath, *, uid: int | None, gid: int | None, mode: int = 0o750) -> None:
    """Create root/parts... as needed, each directory owned by `uid`:`gid`.

    Each component is made with mkdir relative to its parent's descriptor, then opened
    with O_NOFOLLOW and changed by descriptor (fchown), so a symlink planted in its place
    (before this runs, or between a failed try and its retry) is refused instead of
    followed: a root `chown` through a link would hand any directory to the job's user.
    An existing component must be a real directory owned by `uid`; one owned by this
    process (left by an earlier run that could not chown) is handed over. With `uid`
    None (ownership unknown), or when not root, components are only created and checked
    to be real directories."""
    euid = os.geteuid()
    fd = _open_root(location.root)
    try:
        where = Path(location.root)
        for name in location.parts:
            where = where / check_component(name)
            try:
                os.mkdir(name, mode, dir_fd=fd)
            except FileExistsError:
                pass
            child = _open_child(fd, name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, str(where))
            os.close(fd)
            fd = child
            if uid is None:
                continue
            owner = os.fstat(fd).st_uid
            if owner == uid:
                continue
            if owner == euid:
                # Ours: just made, or made earlier without an owner. A job cannot create a
                # directory owned by this process, so nothing here was planted.
                if euid == 0:
                    os.fchown(fd, uid, gid if gid is not None else -1)
                continue
            raise UnsafePath(errno.EPERM, f"{where} exists and belongs to uid {owner}, not {uid}")
    finally:
        os.close(fd)
