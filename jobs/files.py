"""What a job wrote, to list, preview and download: the files of its directory (where its logs
are, the command's working directory), read as its user may have left them.

A job writes its directory while it runs, and may swap anything in it for a link: every read
walks from the job root one component at a time without following links
(cluster/files/jobfs.py), and what it reaches must belong to the job's user. A link is listed
as a link and never opened. Listings and reads are bounded."""

from __future__ import annotations

import os
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from cluster.clusters.services import job_paths
from cluster.files import jobfs
from jobs.logs import owner_uid_of
from jobs.models import Job

MAX_ENTRIES = 1000
# An archive of a folder holds at most this many files; past it, a note in the archive says so.
MAX_ARCHIVE_FILES = 10_000
ARCHIVE_BLOCK = 1024 * 1024
PREVIEW_BYTES = 64 * 1024
TEXT_KINDS = {".txt", ".log", ".out", ".err", ".csv", ".tsv", ".json", ".jsonl", ".yaml", ".yml", ".md", ".py", ".sh"}
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif", ".svg": None}


class JobFilesError(Exception):
    """A path that may not be asked for (400), or nothing there to show (404); words for people."""

    def __init__(self, message: str, status: int):
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class FileEntry:
    name: str
    path: str  # relative to the job's directory, "/"-separated
    kind: str  # file, directory, link, other
    size: int
    modified: datetime


@dataclass(frozen=True)
class Listing:
    path: str
    entries: list[FileEntry]
    truncated: bool


def relative_parts(path: str | None) -> tuple[str, ...]:
    """A path inside the job's directory as its components: "" or "/" is the directory itself;
    ".." or "." anywhere, a NUL or a backslash is refused (400), never resolved."""
    parts = tuple(part for part in (path or "").split("/") if part)
    for part in parts:
        if part in {".", ".."} or "\0" in part or "\\" in part:
            raise JobFilesError("A path inside the job's directory, without '..' or '.'.", 400)
    return parts


def _directory(job: Job) -> tuple[jobfs.Beneath, int]:
    """The job's directory (where its standard output goes) beneath the job root, and the uid
    that must own what is read there; 404 when the portal may not read it."""
    uid = owner_uid_of(job.cluster_user, job.cluster) if job.cluster_user else None
    if not job.standard_output or uid is None:
        raise JobFilesError("This job has no directory the portal can read.", 404)
    try:
        log = job_paths(job.cluster).user_file(job.standard_output, job.cluster_user)
    except ValueError:
        raise JobFilesError("This job has no directory the portal can read.", 404) from None
    return jobfs.Beneath(log.root, log.parts[:-1]), uid


def _beneath(directory: jobfs.Beneath, parts: tuple[str, ...]) -> jobfs.Beneath:
    return jobfs.Beneath(directory.root, (*directory.parts, *parts))


def list_files(job: Job, path: str | None) -> Listing:
    """The entries of a directory of the job's, folders first, then by name."""
    directory, uid = _directory(job)
    parts = relative_parts(path)
    try:
        found, truncated = jobfs.list_directory(_beneath(directory, parts), owner_uid=uid, limit=MAX_ENTRIES)
    except (FileNotFoundError, NotADirectoryError, jobfs.UnsafePath):
        raise JobFilesError("No such folder in the job's directory (yet).", 404) from None
    prefix = "/".join(parts)
    entries = [
        FileEntry(
            name=entry.name,
            path=f"{prefix}/{entry.name}" if prefix else entry.name,
            kind=entry.kind,
            size=entry.size,
            modified=datetime.fromtimestamp(entry.modified, tz=UTC),
        )
        for entry in found
    ]
    entries.sort(key=lambda entry: (entry.kind != "directory", entry.name.lower()))
    return Listing(path=prefix, entries=entries, truncated=truncated)


def open_file(job: Job, path: str | None) -> tuple[int, int, str]:
    """A regular file of the job's user, as (descriptor, its size when opened, name): the caller
    reads at most that size and closes it; 404 for anything else (a link, a folder, a file of
    another uid)."""
    directory, uid = _directory(job)
    parts = relative_parts(path)
    if not parts:
        raise JobFilesError("Name a file inside the job's directory.", 400)
    try:
        fd = jobfs.open_regular_file(_beneath(directory, parts), owner_uid=uid)
    except OSError:
        raise JobFilesError("No such file in the job's directory.", 404) from None
    try:
        size = os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise
    return fd, size, parts[-1]


def preview_kind(name: str) -> str:
    """How a file is previewed: "image", "text", or "" (download only)."""
    suffix = os.path.splitext(name)[1].lower()
    if suffix in IMAGE_TYPES and IMAGE_TYPES[suffix]:
        return "image"  # an SVG can carry script: downloaded, never shown inline
    return "text" if suffix in TEXT_KINDS else ""


def read_preview(job: Job, path: str | None) -> tuple[str, bool]:
    """The first PREVIEW_BYTES of a text file, as text (undecodable bytes replaced), and whether
    the file is longer; the end of a large log is the log view's."""
    fd, size, _name = open_file(job, path)
    try:
        head = jobfs.read_at_most(fd, 0, min(size, PREVIEW_BYTES))
    finally:
        os.close(fd)
    return head.decode("utf-8", errors="replace"), size > PREVIEW_BYTES


def image_type(name: str) -> str | None:
    return IMAGE_TYPES.get(os.path.splitext(name)[1].lower())


class _Sink:
    """Where zipfile writes: what it wrote so far, handed out as the archive's next chunk. It
    has no tell(), so zipfile writes for a stream (sizes after each file's data)."""

    def __init__(self):
        self._pieces: list[bytes] = []

    def write(self, data) -> int:
        self._pieces.append(bytes(data))
        return len(data)

    def flush(self) -> None:
        pass

    def take(self) -> bytes:
        data, self._pieces = b"".join(self._pieces), []
        return data


def _zip_time(modified: float) -> tuple[int, int, int, int, int, int]:
    moment = time.gmtime(max(modified, 315532800))  # a zip's clock starts in 1980
    return moment[:6]


def archive(job: Job, path: str | None) -> tuple[Iterator[bytes], str]:
    """A folder of the job's directory as a zip made while it is sent (one block held at a time),
    and its name. Only regular files of the job's user go in, reached without links; at most
    MAX_ARCHIVE_FILES of them. 404 now for a folder that is not there."""
    directory, uid = _directory(job)
    parts = relative_parts(path)
    try:
        jobfs.list_directory(_beneath(directory, parts), owner_uid=uid, limit=1)
    except (FileNotFoundError, NotADirectoryError, jobfs.UnsafePath):
        raise JobFilesError("No such folder in the job's directory (yet).", 404) from None
    name = "-".join((f"job-{job.slurm_job_id or job.pk}", *parts)) + ".zip"
    return _archive_chunks(directory, parts, uid), name


def _archive_chunks(directory: jobfs.Beneath, top: tuple[str, ...], uid: int) -> Iterator[bytes]:
    sink = _Sink()
    written = 0
    with zipfile.ZipFile(sink, "w", compression=zipfile.ZIP_STORED) as archive_file:
        folders = [()]
        while folders:
            below = folders.pop()
            try:
                entries, _more = jobfs.list_directory(
                    _beneath(directory, (*top, *below)), owner_uid=uid, limit=MAX_ENTRIES
                )
            except OSError:
                continue  # removed or swapped for a link while the archive was made
            for entry in sorted(entries, key=lambda entry: entry.name):
                inside = (*below, entry.name)
                if entry.kind == "directory":
                    folders.append(inside)
                    continue
                if entry.kind != "file":
                    continue
                if written == MAX_ARCHIVE_FILES:
                    archive_file.writestr(
                        "NOT-ALL-FILES.txt", f"This archive holds the first {MAX_ARCHIVE_FILES} files of the folder.\n"
                    )
                    folders = []
                    break
                added = yield from _add_file(
                    archive_file, sink, _beneath(directory, (*top, *inside)), "/".join(inside), uid
                )
                written += added
    yield sink.take()  # the central directory, written as the archive closed


def _add_file(archive_file, sink: _Sink, location: jobfs.Beneath, name: str, uid: int):
    """Adds the file, yielding the archive's chunks as they are made; returns whether it did."""
    try:
        fd = jobfs.open_regular_file(location, owner_uid=uid)
    except OSError:
        return False  # a link, a file of another uid, or gone: left out
    try:
        info = os.fstat(fd)
        member = zipfile.ZipInfo(name, date_time=_zip_time(info.st_mtime))
        position, size = 0, info.st_size
        with archive_file.open(member, "w", force_zip64=True) as target:
            while position < size:
                block = jobfs.read_at_most(fd, position, min(ARCHIVE_BLOCK, size - position))
                if not block:
                    break
                position += len(block)
                target.write(block)
                yield sink.take()
    finally:
        os.close(fd)
    return True
