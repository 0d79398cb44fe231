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


def local_log_path(slurm_path: str) -> Path | None:
    if not slurm_path:
        return None
    try:
        return job_paths().to_local(slurm_path)
    except ValueError:
        return None


def read_tail(path: Path | None, max_bytes: int) -> LogTail:
    """The last `max_bytes` of a file, decoded leniently; a 10 GB log costs one seek."""
    if path is None:
        return LogTail("", 0, False, False)
    try:
        with open(path, "rb") as handle:
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
    except FileNotFoundError:
        return LogTail("", 0, False, False)


def job_logs(job, max_bytes: int) -> dict:
    """The tails of a job's stdout and stderr, and what the analyser recognises in them."""
    from jobs.diagnosis import diagnose

    stdout = read_tail(local_log_path(job.standard_output), max_bytes)
    stderr = (
        read_tail(local_log_path(job.standard_error), max_bytes)
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
