"""The details of many pending jobs in one `squeue` run.

A mass submission puts thousands of new jobs in the state listing at once. slurmrestd answers
`GET /job/{id}` about 115 times a second one at a time and ~260 at 8-16 at once on the dev
machine, so 5,000 new jobs took ~20 s of fetching; `GET /jobs` would answer at once but grows
slurmrestd by gigabytes it never gives back. `squeue --jobs=<ids>` prints 5,000 jobs in under
two seconds, and its memory ends with its process.

Only pending jobs are read this way: they hold no GPUs, so nothing squeue cannot print (the
GPU indexes of an allocation, an exit code) is missing. Their output paths are left empty
(squeue prints them unexpanded, `%j` and all); the job is fetched whole from slurmrestd when it
starts. A job whose record is not clean (an array, a state other than the listing's, a
portal-submitted job) is left out, and the caller fetches it by id.

Free text (a job's name and comment) cannot forge a field or a record: every field ends with a
marker holding a nonce drawn for this run, and the output is split on that marker alone, never
on newlines or commas.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from datetime import UTC, datetime

from cluster.commands.cli import SlurmCli
from cluster.commands.limits import parse_wall_minutes
from cluster.errors import SlurmCommandError
from cluster.records.types import Job
from foundation.sequences import batches

# squeue's --Format names (24.11 and 26.05 alike), in the order parsed below.
QUEUE_FIELDS = (
    "JobID",
    "ArrayTaskID",
    "Name",
    "UserName",
    "Account",
    "Partition",
    "QOS",
    "State",
    "Reason",
    "TRES-PER-NODE",
    "Feature",
    "SubmitTime",
    "StartTime",
    "EndTime",
    "TimeLimit",
    "WorkDir",
    "Comment",
)
# Ids per squeue run: the command line stays far below any shell's or ssh's limit.
QUEUE_BATCH = 2000
_SQUEUE_TIME = "%Y-%m-%dT%H:%M:%S"
_NOTHING = frozenset({"(null)", "N/A"})


def _marker() -> str:
    # `@`, hex digits, `@`: the argument passes cli.py's check, and squeue's --Format takes it
    # as the field's suffix after the `:0` that lifts the width limit. It must not start with a
    # digit: squeue reads the width with strtol, which would swallow one.
    return f"@{secrets.token_hex(8)}@"


def queue_format(marker: str) -> str:
    return ",".join(f"{name}:0{marker}" for name in QUEUE_FIELDS)


def _text(value: str) -> str:
    return "" if value in _NOTHING else value


def parse_slurm_time(value: str) -> datetime | None:
    """A time squeue or sacct printed (standard format, TZ=UTC0) as an aware UTC datetime."""
    try:
        return datetime.strptime(value, _SQUEUE_TIME).replace(tzinfo=UTC)
    except ValueError:
        return None  # "N/A", "Unknown"


def _minutes(value: str) -> int | None:
    try:
        return parse_wall_minutes(value)
    except ValueError:
        return None  # "UNLIMITED", "NOT_SET", "INVALID"


def parse_queue(output: str, marker: str, listing: Mapping[int, tuple[str, ...]]) -> dict[int, Job]:
    """Pending jobs from squeue's output (run under TZ=UTC0). `listing` holds the states the
    state listing showed for the ids asked: a record is kept only when squeue saw the job
    pending too, and it takes the listing's states, so the next pass sees no change."""
    pieces = output.split(marker)
    width = len(QUEUE_FIELDS)
    if (len(pieces) - 1) % width or pieces[-1].strip():
        return {}  # not squeue's shape at all: the caller fetches every job by id
    found: dict[int, Job] = {}
    seen_twice: set[int] = set()
    for start in range(0, len(pieces) - 1, width):
        values = pieces[start : start + width]
        values[0] = values[0].removeprefix("\n")
        job = _pending_job(dict(zip(QUEUE_FIELDS, values, strict=True)), listing)
        if job is None:
            continue
        if job.job_id in found:
            seen_twice.add(job.job_id)
        found[job.job_id] = job
    for job_id in seen_twice:
        del found[job_id]
    return found


def _pending_job(record: dict[str, str], listing: Mapping[int, tuple[str, ...]]) -> Job | None:
    if not record["JobID"].isdigit() or _text(record["ArrayTaskID"]):
        return None  # an array's tasks are fetched by id
    job_id = int(record["JobID"])
    states = listing.get(job_id)
    if not states or states[0] != "PENDING" or record["State"] != "PENDING":
        return None
    if not record["UserName"] or record["UserName"].isdigit():
        return None  # a uid the login node could not name: slurmrestd names it
    return Job(
        job_id=job_id,
        name=record["Name"],
        user_name=record["UserName"],
        account=record["Account"],
        partition=record["Partition"],
        qos=record["QOS"],
        states=states,
        state_reason=record["Reason"],
        comment=_text(record["Comment"]),
        nodes="",
        tres_per_node=_text(record["TRES-PER-NODE"]),
        allocated_tres="",
        constraints=_text(record["Feature"]),
        submit_time=parse_slurm_time(record["SubmitTime"]),
        start_time=parse_slurm_time(record["StartTime"]),  # the expected start, as slurmrestd gives it
        end_time=parse_slurm_time(record["EndTime"]),
        time_limit_minutes=_minutes(record["TimeLimit"]),
        exit_code=None,
        exit_signal=None,
        standard_output="",
        standard_error="",
        working_directory=_text(record["WorkDir"]),
    )


def pending_job_details(cli: SlurmCli, listing: Mapping[int, tuple[str, ...]]) -> dict[int, Job]:
    """The pending jobs among `listing` (id -> states from the state listing), read with one
    squeue run per QUEUE_BATCH ids. Jobs it cannot vouch for are missing from the answer."""
    found: dict[int, Job] = {}
    ids = sorted(listing)
    for batch in batches(ids, QUEUE_BATCH):
        marker = _marker()
        shown = cli.run(
            # Times in UTC and in Slurm's standard form, whatever the login node's environment.
            "env", "TZ=UTC0", "SLURM_TIME_FORMAT=standard", "squeue", "--noheader", "--states=all",
            f"--jobs={','.join(str(job_id) for job_id in batch)}", f"--Format={queue_format(marker)}",
            check=False,
        )  # fmt: skip
        if shown.returncode != 0:
            if "Invalid job id" in shown.stderr:
                continue  # squeue's answer when the only id asked has gone: nothing to read
            raise SlurmCommandError(f"squeue failed ({shown.returncode}): {(shown.stderr or shown.stdout).strip()}")
        found.update(parse_queue(shown.stdout, marker, listing))
    return found
