"""Self-service GPU diagnostics: `nvidia-smi -q -d MEMORY,UTILIZATION,TEMPERATURE,POWER` in a
short Slurm job pinned to the GPU's node, run as the person who asked, with the parsed
result on the GPU page. Where a node has no nvidia-smi (the dev cluster's emulated GPUs)
the job says so and the page shows that plainly: no output is ever made up."""

from __future__ import annotations

import re

from cluster.errors import SlurmError
from console.actions.pinned_jobs import submit_pinned_job
from console.models import DiagnosticRun
from foundation.ratelimit import hit
from jobs.logs import local_log_path, read_tail
from jobs.models import FINAL_STATES
from plans.catalog import plan_for

NO_NVIDIA_SMI = "GPUPOOL_DIAGNOSTIC_NO_NVIDIA_SMI"
SCRIPT = """#!/bin/bash
echo "GPUPOOL_DIAGNOSTIC node=$(hostname) requested_gpu={index} allocated=$CUDA_VISIBLE_DEVICES"
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "{marker}: nvidia-smi is not installed on this node"
  exit 3
fi
exec timeout 60 nvidia-smi -q -d MEMORY,UTILIZATION,TEMPERATURE,POWER -i "${{CUDA_VISIBLE_DEVICES%%,*}}"
"""


DIAGNOSTICS_PER_MINUTE = 3


class DiagnosticRefused(Exception):
    pass


def start_diagnostic(user, node: str, index: int, gpu_type: str) -> DiagnosticRun:
    profile = user.profile
    if not profile.cluster_username or not profile.provisioned_at:
        raise DiagnosticRefused("Your cluster account is not ready yet.")
    if profile.role != "admin":
        if gpu_type not in plan_for(user).gpu_quota:
            raise DiagnosticRefused(f"Your plan does not include {gpu_type} GPUs.")
        unfinished = DiagnosticRun.objects.filter(requested_by=user, job__isnull=False).exclude(
            job__state__in=FINAL_STATES
        )
        if unfinished.exists():
            raise DiagnosticRefused("Your previous diagnostic is still queued or running; wait for it to finish.")
        if not hit("diagnose", str(user.pk), limit=DIAGNOSTICS_PER_MINUTE).allowed:
            raise DiagnosticRefused("Too many diagnostics; try again in a minute.")
    try:
        job = submit_pinned_job(
            user,
            name=f"diagnose-{node}-gpu{index}",
            script=SCRIPT.format(index=int(index), marker=NO_NVIDIA_SMI),
            node=node,
            tres_per_node=f"gres/gpu:{gpu_type}:1",
            minutes=2,
        )
    except SlurmError as exc:
        return DiagnosticRun.objects.create(requested_by=user, node=node, index=index, error=exc.public_message)
    return DiagnosticRun.objects.create(requested_by=user, node=node, index=index, job=job)


def latest_diagnostic(user, node: str, index: int) -> dict | None:
    run = DiagnosticRun.objects.filter(requested_by=user, node=node, index=index).select_related("job").first()
    if run is None:
        return None
    result = {
        "run": run,
        "state": run.job.state if run.job else "SUBMIT_FAILED",
        "state_words": run.job.get_state_display().lower() if run.job else "not submitted",
        # The page re-reads the result until the job has ended (static/js/live_parts.js).
        "finished": run.job is None or run.job.is_final,
        "error": run.error,
    }
    if run.job:
        text = read_tail(local_log_path(run.job.standard_output, run.job.cluster_user), 64 * 1024).text
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
