"""Reading job logs safely: only under the job root, and never more than a tail."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from cluster.services import job_paths


@dataclass(frozen=True)
class LogTail:
    text: str
    size: int
    truncated: bool
    exists: bool


def local_log_path(slurm_path: str, cluster_user: str) -> Path | None:
    """Where the portal reads a job's log, or None when it must not (see JobPathMap.user_file)."""
    if not slurm_path or not cluster_user:
        return None
    try:
        return job_paths().user_file(slurm_path, cluster_user)
    except ValueError:
        return None


def open_log(path: Path):
    """Opens without following a final symlink: one swapped in after the check is refused."""
    return os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb")


def read_tail(path: Path | None, max_bytes: int) -> LogTail:
    """The last `max_bytes` of a file, decoded leniently; a 10 GB log costs one seek."""
    if path is None:
        return LogTail("", 0, False, False)
    try:
        with open_log(path) as handle:
            size = os.fstat(handle.fileno()).st_size
            if size > max_bytes:
                handle.seek(size - max_bytes)
                data = handle.read(max_bytes)
                # Drop the partial first line so the tail starts at a line boundary.
                newline = data.find(b"\n")
                if 0 <= newline < len(data) - 1:
                    data = data[newline + 1 :]
                return LogTail(data.decode("utf-8", errors="replace"), size, True, True)
            return LogTail(handle.read().decode("utf-8", errors="replace"), size, False, True)
    except (FileNotFoundError, OSError):
        # OSError includes ELOOP: the file became a symlink after it was checked.
        return LogTail("", 0, False, False)


def job_logs(job, max_bytes: int) -> dict:
    """The tails of a job's stdout and stderr, and what the analyser recognises in them."""
    from jobs.diagnosis import diagnose

    stdout = read_tail(local_log_path(job.standard_output, job.cluster_user), max_bytes)
    stderr = (
        read_tail(local_log_path(job.standard_error, job.cluster_user), max_bytes)
        if job.standard_error and job.standard_error != job.standard_output
        else LogTail("", 0, False, False)
    )
    findings = []
    if job.state not in {"PENDING", "RUNNING", "SUBMITTING", "COMPLETED"}:
        findings = [
            finding.__dict__
            for finding in diagnose(stdout.text + "\n" + stderr.text, state=job.state, exit_code=job.exit_code)
        ]
    return {
        "stdout": stdout.text,
        "stderr": stderr.text,
        "stdout_size": stdout.size,
        "stderr_size": stderr.size,
        "truncated": stdout.truncated or stderr.truncated,
        "diagnosis": findings,
    }
