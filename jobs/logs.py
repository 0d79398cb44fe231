"""Reading job logs safely: only in the job owner's directory, never through a symlink,
only a regular file of the owner's, and never more than a tail (or, for a download, more
than the file held when it was opened).

A job owns the directory its logs are in, so anything in it may be swapped for a symlink
(to the Slurm JWT key, say), a FIFO or a file that never stops growing at any moment:
see `cluster.files.jobfs`, which does every open here."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from accounts.models import ClusterAccount, Profile
from cluster.clusters.registry import primary_cluster_name
from cluster.clusters.services import job_paths
from cluster.files import jobfs
from jobs import site_rules
from jobs.diagnosis.diagnose import diagnose
from jobs.submission.batch_script import CONTAINER_LAUNCH, CONTAINER_STARTED


@dataclass(frozen=True)
class LogTail:
    text: str
    size: int
    truncated: bool
    exists: bool


@dataclass(frozen=True)
class LogPath:
    """A log as the portal may read it: where it lies beneath the job root, and the uid
    that must own it. What `local_log_path` returns and `open_log`/`read_tail` take."""

    location: jobfs.Beneath
    owner_uid: int

    def __str__(self) -> str:
        return str(self.location)


def owner_uid_of(cluster_user: str, cluster: str | None = None) -> int | None:
    if cluster is not None and cluster != primary_cluster_name():
        # A further cluster's uid (accounts.models.ClusterAccount): the same name, its own number.
        return (
            ClusterAccount.objects.filter(profile__cluster_username=cluster_user, cluster=cluster)
            .exclude(uid=None)
            .values_list("uid", flat=True)
            .first()
        )
    return (
        Profile.objects.filter(cluster_username=cluster_user)
        .exclude(cluster_uid=None)
        .values_list("cluster_uid", flat=True)
        .first()
    )


def _log_path(slurm_path: str, cluster_user: str, owner_uid: int | None, cluster: str | None = None) -> LogPath | None:
    if not slurm_path or not cluster_user or owner_uid is None:
        return None
    try:
        return LogPath(job_paths(cluster).user_file(slurm_path, cluster_user), owner_uid)
    except ValueError:
        return None


def local_log_path(slurm_path: str, cluster_user: str, cluster: str | None = None) -> LogPath | None:
    """Where the portal reads a job's log, or None when it must not: outside that user's
    job directory, or the user's cluster uid is unknown (then no file can be shown to be
    theirs)."""
    if not slurm_path or not cluster_user:
        return None
    return _log_path(slurm_path, cluster_user, owner_uid_of(cluster_user, cluster), cluster)


def open_log(path: LogPath) -> tuple[int, int]:
    """(descriptor, size when opened) for a download, which sends no more than that size:
    raises OSError unless the log is a regular file of its owner's reached without symlinks."""
    fd = jobfs.open_regular_file(path.location, owner_uid=path.owner_uid)
    try:
        return fd, os.fstat(fd).st_size
    except BaseException:
        os.close(fd)
        raise


def read_head(path: LogPath | None, max_bytes: int) -> str:
    """The first `max_bytes` of a log, decoded leniently; "" when missing or refused."""
    if path is None:
        return ""
    try:
        fd = jobfs.open_regular_file(path.location, owner_uid=path.owner_uid)
    except OSError:
        return ""
    try:
        return jobfs.read_at_most(fd, 0, max_bytes).decode("utf-8", errors="replace")
    except OSError:
        return ""
    finally:
        os.close(fd)


def read_tail(path: LogPath | None, max_bytes: int) -> LogTail:
    """The last `max_bytes` of a log, decoded leniently; a 10 GB log costs one seek, and
    a log that grows while it is read still yields at most `max_bytes`."""
    if path is None:
        return LogTail("", 0, False, False)
    try:
        fd = jobfs.open_regular_file(path.location, owner_uid=path.owner_uid)
    except OSError:
        # Missing, or refused: a symlink, a FIFO, not the owner's. The page says "no log".
        return LogTail("", 0, False, False)
    try:
        size = os.fstat(fd).st_size
        start = max(0, size - max_bytes)
        data = jobfs.read_at_most(fd, start, size - start)
    except OSError:
        return LogTail("", 0, False, False)
    finally:
        os.close(fd)
    truncated = start > 0
    if truncated:
        # Drop the partial first line so the tail starts at a line boundary.
        newline = data.find(b"\n")
        if 0 <= newline < len(data) - 1:
            data = data[newline + 1 :]
    return LogTail(data.decode("utf-8", errors="replace"), size, truncated, True)


def log_text(stdout: LogTail, stderr: LogTail) -> str:
    """What the diagnosis reads: the output's tail, then the errors' tail."""
    return stdout.text + "\n" + stderr.text


def job_log_tails(job, max_bytes: int) -> tuple[LogTail, LogTail]:
    """The tails of a job's stdout and stderr (stderr empty when it is the same file)."""
    owner_uid = owner_uid_of(job.cluster_user, job.cluster) if job.cluster_user else None
    stdout = read_tail(_log_path(job.standard_output, job.cluster_user, owner_uid, job.cluster), max_bytes)
    stderr = (
        read_tail(_log_path(job.standard_error, job.cluster_user, owner_uid, job.cluster), max_bytes)
        if job.standard_error and job.standard_error != job.standard_output
        else LogTail("", 0, False, False)
    )
    return stdout, stderr


def job_logs(job, max_bytes: int) -> dict:
    """The tails of a job's stdout and stderr, and what the analyser recognises in them."""
    stdout, stderr = job_log_tails(job, max_bytes)
    findings = []
    if job.state not in {"PENDING", "RUNNING", "SUBMITTING", "COMPLETED"}:
        findings = [
            finding.__dict__
            for finding in diagnose(
                log_text(stdout, stderr), state=job.state, exit_code=job.exit_code, extra_rules=site_rules.current()
            )
        ]
    return {
        "stdout": stdout.text,
        "stderr": stderr.text,
        "stdout_size": stdout.size,
        "stderr_size": stderr.size,
        "truncated": stdout.truncated or stderr.truncated,
        "diagnosis": findings,
    }


# Lines the portal's batch script and the node's tools write beside the job's own: the
# container's launch and start stamps (epoch seconds, read by jobs/container_starts.py), the
# image import's progress, the dataset tool's protocol lines (jobs/dataset_staging.py). People
# read their job's output without them; the page keeps them in a closed "setting up" detail.
_SETUP_LINE = re.compile(
    r"^(?:\[gpupool\] (?:staging datasets on this node|datasets in \S.*)"
    r"|GPUPOOL_DATASET_(?:PROGRESS|EVICTED|VIEW) .*"
    r"|pyxis: (?:importing|imported|creating|running|reusing) .*)$"
)
_STAMP_LINE = re.compile(f"^(?:{re.escape(CONTAINER_LAUNCH)}|{re.escape(CONTAINER_STARTED)}) ")


def split_setup_lines(text: str) -> tuple[str, str]:
    """(the job's own lines, the setup lines in the order written). The container's two
    stamps are left out of both: the job page says how long the container took to start."""
    own, setup = [], []
    for line in text.splitlines(keepends=True):
        bare = line.rstrip("\r\n")
        if _STAMP_LINE.match(bare):
            continue
        (setup if _SETUP_LINE.match(bare) else own).append(line)
    return "".join(own), "".join(setup)


def job_logs_for_people(job, max_bytes: int) -> dict:
    """The job page's logs: `job_logs` with the portal's and the node tools' lines moved from
    the output and the errors into `setup` (downloads and the API keep the files as written)."""
    logs = job_logs(job, max_bytes)
    stdout, stdout_setup = split_setup_lines(logs["stdout"])
    stderr, stderr_setup = split_setup_lines(logs["stderr"])
    return {**logs, "stdout": stdout, "stderr": stderr, "setup": stdout_setup + stderr_setup}
