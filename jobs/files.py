"""What a job wrote, to list, preview and download: the files of its directory (where its logs
are, the command's working directory), read as its user may have left them.

A job writes its directory while it runs, and may swap anything in it for a link: every read
walks from the job root one component at a time without following links
(cluster/files/jobfs.py), and what it reaches must belong to the job's user. A link is listed
as a link and never opened. Listings and reads are bounded."""

from __future__ import annotations

import os
from dataclasses import dataclass
from datetime import UTC, datetime

from cluster.clusters.services import job_paths
from cluster.files import jobfs
from jobs.logs import owner_uid_of
from jobs.models import Job

MAX_ENTRIES = 1000
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
