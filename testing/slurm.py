"""Helpers for tests that run against the real dev cluster (`make cluster-up`)."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import TypeVar

from django.conf import settings

from cluster.clusters.services import job_paths, slurm_cli
from cluster.commands.provisioning import provisioning_backend
from cluster.errors import SlurmNotFound
from cluster.records.types import Job, JobSubmission
from cluster.slurmrest.client import SlurmRestClient

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], *, timeout: float = 90, interval: float = 0.25, what: str = "condition"
) -> T:
    """Poll `probe` until it returns something truthy; fail with `what` after `timeout`."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


def new_job_dir(owner: str | None = None) -> PurePosixPath:
    paths = job_paths()
    directory = paths.job_dir(f"test-{secrets.token_hex(6)}")
    local = paths.to_local(directory)
    local.mkdir(parents=True)
    # Jobs run as their owner, who must be able to write their output here.
    local.chmod(0o1777)
    return directory


def submission(script_body: str, *, directory: PurePosixPath | None = None, **overrides) -> JobSubmission:
    directory = directory or new_job_dir()
    fields = {
        "name": "pytest",
        "script": "#!/bin/bash\n" + script_body + "\n",
        "working_directory": str(directory),
        "standard_output": f"{directory}/stdout.log",
        "standard_error": f"{directory}/stderr.log",
        "partition": settings.SLURM_PARTITION,
        "account": settings.SLURM_ACCOUNT,
        "time_limit_minutes": 5,
    }
    fields.update(overrides)
    return JobSubmission(**fields)


def submit_held(client: SlurmRestClient, script_body: str = "sleep 60", **overrides) -> int:
    """A held job (PENDING until released or cancelled) of the client's user, by default one
    rtx4090 GPU for 7 minutes. `hold` is no field of JobSubmission: the portal never holds."""
    fields = {"tres_per_node": "gres/gpu:rtx4090:1", "time_limit_minutes": 7, **overrides}
    body = client.adapter.encode_submission(submission(script_body, **fields))
    body["job"]["hold"] = True
    path = client.adapter.slurm_path("job/submit")
    return client.adapter.decode_submitted_job_id(client._request("POST", path, body=body))


def wait_for_state(client: SlurmRestClient, job_id: int, states: set[str], timeout: float = 90) -> Job:
    """The job once it is in one of `states`; a job that ran and ended comes with the nodes it
    ran on (`SlurmRestClient.ended_job_nodes`: slurmctld may briefly report none)."""

    def probe():
        try:
            job = client.get_job(job_id)
        except SlurmNotFound:
            return None
        if job.state not in states:
            return None
        nodes = client.ended_job_nodes(job)
        if not nodes and job.is_terminal and job.state != "CANCELLED" and job.start_time is not None:
            return None  # it ran, and slurmdbd has not recorded where yet
        return replace(job, nodes=nodes)

    return wait_for(probe, timeout=timeout, what=f"job {job_id} to reach {sorted(states)} with its nodes")


def wait_until_requeued(client: SlurmRestClient, job_id: int, timeout: float = 60) -> Job:
    """A job just requeued (`scontrol requeue`), once its run has finished completing: Slurm
    shows it "PENDING,COMPLETING" until the nodes are clean, then "PENDING". Until then a
    cancel runs no hook (jobcomp logged the requeue already; the cancel logs no completion)
    and a new StartTime is overwritten when the completing ends (the requeue's BeginTime
    delay, ~2 min, is set then). Slurm promises those only of a job plainly pending."""

    def probe():
        job = client.get_job(job_id)
        return job if job.states == ("PENDING",) else None

    return wait_for(
        probe, timeout=timeout, interval=0.05, what=f"requeued job {job_id} to finish completing (PENDING alone)"
    )


def read_output(job: Job) -> str:
    return job_paths().to_local(job.standard_output).read_text()


def unique_cluster_name(prefix: str = "pt") -> str:
    return f"{prefix}{os.getpid() % 1000}{secrets.token_hex(3)}"


def remove_cluster_user(name: str, cluster: str | None = None) -> None:
    """What a test or benchmark provisioned, undone: the user's jobs cancelled, then the Unix
    user and the association removed (on `cluster`, the portal's own by default)."""
    cli = slurm_cli(cluster)
    cli.run("scancel", "-u", name, check=False)
    provisioning_backend(settings.PROVISIONING_BACKEND, cli, settings.SLURM_ACCOUNT).remove_user(name)


BLOCKER = "#!/bin/sh\nsleep 900\n"


@contextmanager
def a100s_held(root: Path, cli, minutes: int):
    """Every A100 of a dev cluster held for `minutes` by root's jobs (a script in its root:
    sbatch's arguments are checked words, never a shell line)."""
    (Path(root) / "tmp/gpupool-placement-blocker.sh").write_text(BLOCKER)
    ids = []

    def running():
        listed = cli.run("squeue", "-h", "-t", "RUNNING", "-n", "placement-blocker", "-o", "%i").stdout.split()
        return set(ids) <= set(listed)

    try:
        for _ in range(2):
            answer = cli.run(
                "sbatch", "--parsable", "--partition=gpu", "--gres=gpu:a100:4", "--nodes=1", f"--time={minutes}",
                "--job-name=placement-blocker", "--output=/dev/null", "/tmp/gpupool-placement-blocker.sh",
            )  # fmt: skip
            ids.append(answer.stdout.strip().split(";")[0])
        wait_for(running, timeout=90, what="both blockers running")
        yield ids
    finally:
        for job_id in ids:
            cli.run("scancel", job_id, check=False)
