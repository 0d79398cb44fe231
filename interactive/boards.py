"""What a TensorBoard session shows: the files of one of its owner's jobs, or every task of one of
its owner's sweeps side by side (one board comparing them).

The session's job reads them, never writes: the job script mounts each directory read-only at its
own path (GPUPOOL_READ_ONLY_DIRS, jobs/submission/batch_script.py) and the launcher
(interactive/launchers/tensorboard_board.py) hands GPUPOOL_BOARD_LOGDIRS to TensorBoard as its
`--logdir_spec`. A job's runs are named `job-<id>`; a sweep's tasks `sweep/<task>` (its first
array; a later array's `from-<its first index>/<task>`), so a run's name says which point it is.
Paths are the portal's own (a job root, a user name, a uuid, a task number): neither ',' nor ':'
can be in them, which both lists use as separators, and each is checked again here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cluster.clusters.registry import primary_cluster_name
from groups.queries import row_id
from jobs import protocol
from jobs.models import Job, JobArray, Sweep
from sweeps.submit import array_directory

BOARD_FIELDS = ("board_job", "board_sweep")


def board_sources(owner, data: Mapping[str, Any], *, needs_board: bool) -> tuple[Job | None, Sweep | None, dict]:
    """The job or sweep a new session shows, from `board_job` or `board_sweep` (ids), and the
    errors in words: a board needs exactly one, of the owner's; another kind takes neither."""
    given = {field: data.get(field) for field in BOARD_FIELDS if data.get(field) not in (None, "")}
    if not needs_board:
        return None, None, {field: ["Only a TensorBoard session shows a job or a sweep."] for field in given}
    if len(given) != 1:
        message = "Choose the job or the sweep the board shows (one of them)."
        return None, None, {"board_job": [message]}
    field, value = next(iter(given.items()))
    pk = row_id(value)  # the API refused a non-number before; the form sends digits
    if field == "board_job":
        job = Job.objects.filter(pk=pk, owner=owner, array__isnull=True).first() if pk else None
        if job is None:
            return None, None, {field: ["No job of yours has that id."]}
        if job.slurm_job_id is None:
            return None, None, {field: ["That job never reached Slurm: it has no files to show."]}
        return job, None, {}
    sweep = Sweep.objects.filter(pk=pk, owner=owner).first() if pk else None
    if sweep is None:
        return None, None, {field: ["No sweep of yours has that id."]}
    return None, sweep, {}


def board_cluster(job: Job | None) -> str:
    """The cluster a board runs on: its job's (the files are there); a sweep's is the portal's own."""
    return job.cluster if job is not None else primary_cluster_name()


def _checked(path: str) -> str:
    if not path.startswith("/") or "," in path or ":" in path:
        raise ValueError(f"a board cannot read {path!r}")
    return path


def board_environment(job: Job | None, sweep: Sweep | None) -> dict[str, str]:
    """GPUPOOL_READ_ONLY_DIRS (what the job script mounts, ':'-separated) and GPUPOOL_BOARD_LOGDIRS
    (TensorBoard's `name:path,...`) for a board of `job` or `sweep`; {} for neither."""
    mounts: list[str] = []
    runs: list[str] = []
    if job is not None:
        directory = _checked(str(protocol.job_directory(job)))
        mounts.append(directory)
        runs.append(f"job-{job.pk}:{directory}")
    elif sweep is not None:
        arrays = JobArray.objects.filter(sweep=sweep, slurm_array_job_id__isnull=False).order_by("offset", "pk")
        cluster_users = dict(
            Job.objects.filter(array__sweep=sweep).order_by("array_id").values_list("array_id", "cluster_user")
        )
        for position, array in enumerate(arrays):
            if array.pk not in cluster_users:
                continue  # an array with no task rows never ran: nothing to show
            directory = _checked(str(array_directory(array, cluster_users[array.pk])))
            mounts.append(directory)
            runs.append(f"{'sweep' if position == 0 else f'from-{array.offset}'}:{directory}")
    if not mounts:
        return {}
    return {"GPUPOOL_READ_ONLY_DIRS": ":".join(mounts), "GPUPOOL_BOARD_LOGDIRS": ",".join(runs)}
