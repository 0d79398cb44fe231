"""Self-service GPU diagnostics: `nvidia-smi -q -d MEMORY,UTILIZATION,TEMPERATURE,POWER` in a
short Slurm job pinned to the GPU's node, run as the person who asked, with the parsed
result on the GPU page. Where a node has no nvidia-smi (the dev cluster's emulated GPUs)
the job says so and the page shows that plainly: no output is ever made up."""

from __future__ import annotations

import re
import uuid

from django.conf import settings
from django.db import transaction

from cluster.errors import SlurmError
from cluster.services import rest_client
from cluster.types import JobSubmission
from console.models import DiagnosticRun
from jobs.actions import make_user_directory
from jobs.logs import local_log_path, read_tail
from jobs.models import Job, JobState

NO_NVIDIA_SMI = "GPUPOOL_DIAGNOSTIC_NO_NVIDIA_SMI"
SCRIPT = """#!/bin/bash
echo "GPUPOOL_DIAGNOSTIC node=$(hostname) requested_gpu={index} allocated=$CUDA_VISIBLE_DEVICES"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "{marker}: nvidia-smi is not installed on this node"
  exit 3
fi
exec timeout 60 nvidia-smi -q -d MEMORY,UTILIZATION,TEMPERATURE,POWER -i "${{CUDA_VISIBLE_DEVICES%%,*}}"
"""


class DiagnosticRefused(Exception):
    pass


def start_diagnostic(user, node: str, index: int, gpu_type: str) -> DiagnosticRun:
    profile = user.profile
    if not profile.cluster_username or not profile.provisioned_at:
        raise DiagnosticRefused("Your cluster account is not ready yet.")
    directory = make_user_directory(
        profile.cluster_username,
        f"diagnose-{node}-{index}-{uuid.uuid4().hex[:12]}",
        profile.cluster_uid,
        profile.cluster_gid,
    )
    submission = JobSubmission(
        name=f"diagnose-{node}-gpu{index}",
        script=SCRIPT.format(index=int(index), marker=NO_NVIDIA_SMI),
        working_directory=str(directory),
        standard_output=f"{directory}/stdout.log",
        standard_error=f"{directory}/stdout.log",
        partition=settings.SLURM_PARTITION,
        account=settings.SLURM_ACCOUNT,
        time_limit_minutes=2,
        tres_per_node=f"gres/gpu:{gpu_type}:1",
        required_nodes=(node,),
        requeue=False,
    )
    try:
        slurm_job_id = rest_client(profile.cluster_username).submit_job(submission)
    except SlurmError as exc:
        return DiagnosticRun.objects.create(requested_by=user, node=node, index=index, error=exc.message)
    with transaction.atomic():
        job = Job.objects.create(
            owner=user,
            slurm_job_id=slurm_job_id,
            cluster_user=profile.cluster_username,
            name=submission.name,
            state=JobState.PENDING,
            tres_per_node=submission.tres_per_node,
            standard_output=submission.standard_output,
            standard_error=submission.standard_error,
        )
        return DiagnosticRun.objects.create(requested_by=user, node=node, index=index, job=job)


def latest_diagnostic(user, node: str, index: int) -> dict | None:
    run = DiagnosticRun.objects.filter(requested_by=user, node=node, index=index).select_related("job").first()
    if run is None:
        return None
    result = {"run": run, "state": run.job.state if run.job else "SUBMIT_FAILED", "error": run.error}
    if run.job:
        text = read_tail(local_log_path(run.job.standard_output), 64 * 1024).text
        result["output"] = text
        result["unavailable"] = NO_NVIDIA_SMI in text
        result["parsed"] = parse_nvidia_smi_query(text) if not result["unavailable"] else {}
    return result


# nvidia-smi pads keys and separates them from values with " : "; a header such as
# "GPU 00000000:3B:00.0" has colons but no " : ".
_LINE = re.compile(r"^(?P<indent> *)(?P<key>\S.*?)\s+:\s*(?P<value>.*)$")


def parse_nvidia_smi_query(text: str) -> dict:
    """`nvidia-smi -q` output -> nested dict by indentation. Section headers are lines
    without a value ("    FB Memory Usage"); "Key : Value" lines are leaves."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith(("=", "GPUPOOL_")):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1] if stack else root
        match = _LINE.match(raw)
        if match and match["value"].strip():
            parent[match["key"].strip()] = match["value"].strip()
        else:
            name = (match["key"] if match else raw).strip()
            section: dict = {}
            parent[name] = section
            stack.append((indent, section))
    return root
