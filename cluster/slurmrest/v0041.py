"""data_parser v0.0.41 (Slurm 24.11): JSON <-> cluster.records.types.

Shapes that differ from v0.0.38 (see notes/slurm-24.11.md): numbers come wrapped as
{"set", "infinite", "number"}; job and node states are lists; `environment` is a list
of "K=V"; GPUs are requested with `tres_per_node` (`gres` is silently ignored).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from cluster.records.array_ids import bitmap_task_ids
from cluster.records.gres import gpu_groups, job_gpu_indexes, parse_gres, shard_totals
from cluster.records.hostlist import expand_hostlist
from cluster.records.types import (
    AccountingRecord,
    Job,
    JobStateEntry,
    JobSubmission,
    Node,
    Partition,
    Reservation,
)
from cluster.slurmrest.base import ApiAdapter, Json


def _number(value: Any) -> int | None:
    """Unwrap {"set": true, "infinite": false, "number": N}; unset or infinite -> None."""
    if isinstance(value, dict):
        if not value.get("set", False) or value.get("infinite", False):
            return None
        return int(value.get("number", 0))
    if value is None:
        return None
    return int(value)


def _time(value: Any) -> datetime | None:
    seconds = _number(value)
    if not seconds:  # Slurm uses 0 for "not yet"
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


def _step_usage(steps: list) -> dict:
    """CPU time and the largest resident memory over a job's steps (jobacct_gather's figures).
    The job's own `time.total` stays 0 in slurmdbd's answer (seen on 24.11 and 26.05): the steps
    carry it. Memory in a step's usage TRES is in bytes; a step shorter than the gather interval
    has none, and the job then has no memory figure (None, never 0)."""
    if not steps:
        return {}
    cpu = 0.0
    rss: int | None = None
    for step in steps:
        total = (step.get("time") or {}).get("total") or {}
        cpu += int(total.get("seconds", 0) or 0) + int(total.get("microseconds", 0) or 0) / 1_000_000
        for tres in ((step.get("tres") or {}).get("requested") or {}).get("max") or []:
            if tres.get("type") == "mem" and int(tres.get("count", 0) or 0) > 0:
                rss = max(rss or 0, int(tres["count"]))
    return {"cpu_seconds": round(cpu), "max_rss_bytes": rss}


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(item for item in value.split(",") if item)
    return tuple(str(item) for item in value)


def _exit(value: Any) -> tuple[int | None, int | None]:
    if not isinstance(value, dict):
        return None, None
    signal = value.get("signal") or {}
    return _number(value.get("return_code")), _number(signal.get("id"))


def _gpu_allocation(nodes: str, gres_detail: list[str]) -> dict[str, tuple[int, ...]]:
    """gres_detail has one entry per allocated node, in the order of the node list."""
    allocation = {}
    for node, detail in zip(expand_hostlist(nodes), gres_detail, strict=False):
        indexes = job_gpu_indexes(detail)
        if indexes:
            allocation[node] = indexes
    return allocation


class V0041Adapter(ApiAdapter):
    version = "v0.0.41"

    def encode_submission(self, submission: JobSubmission) -> Json:
        job: Json = {
            "name": submission.name,
            "script": submission.script,
            "current_working_directory": submission.working_directory,
            "standard_output": submission.standard_output,
            "standard_error": submission.standard_error,
            # A list is mandatory in v0.0.41; an empty one makes the job inherit nothing.
            "environment": [f"{key}={value}" for key, value in submission.environment.items()]
            or ["PATH=/usr/bin:/bin"],
            "requeue": submission.requeue,
            "cpus_per_task": submission.cpus_per_task,
        }
        optional = {
            "partition": submission.partition,
            "account": submission.account,
            "qos": submission.qos,
            "tres_per_node": submission.tres_per_node,
            "constraints": submission.constraints,
            "prefer": submission.prefer,
            "reservation": submission.reservation,
            "comment": submission.comment,
            "dependency": submission.dependency,
        }
        job.update({key: value for key, value in optional.items() if value})
        if submission.required_nodes:
            job["required_nodes"] = list(submission.required_nodes)
        if submission.array:
            job["array"] = submission.array
        if submission.time_limit_minutes is not None:
            job["time_limit"] = {"set": True, "infinite": False, "number": submission.time_limit_minutes}
        if submission.memory_per_node_mb is not None:
            job["memory_per_node"] = {"set": True, "infinite": False, "number": submission.memory_per_node_mb}
        return {"job": job}

    def decode_job_states(self, payload: Json) -> list[JobStateEntry]:
        entries = []
        for item in payload.get("jobs", []):
            raw_id = str(item.get("job_id", ""))
            # An array's task is listed as "12_3", its tasks without a record of their own as
            # "12_[4-23%4]"; heterogeneous job members ("12+1") are not mirrored.
            array_id, underscore, task = raw_id.partition("_")
            if not array_id.isdigit() or (underscore and not task):
                continue
            states = _strings(item.get("state"))
            entries.append(JobStateEntry(job_id=int(array_id), states=states, array_task=task))
        return entries

    def decode_jobs(self, payload: Json) -> list[Job]:
        return [self._job(item) for item in payload.get("jobs", [])]

    def _job(self, item: Json) -> Job:
        exit_code, exit_signal = _exit(item.get("exit_code"))
        return Job(
            job_id=int(item["job_id"]),
            name=item.get("name", ""),
            user_name=item.get("user_name", ""),
            account=item.get("account", ""),
            partition=item.get("partition", ""),
            qos=item.get("qos", ""),
            states=_strings(item.get("job_state")),
            state_reason=item.get("state_reason", "") or "",
            comment=item.get("comment", "") or "",
            nodes=item.get("nodes", "") or "",
            tres_per_node=item.get("tres_per_node", "") or "",
            allocated_tres=item.get("tres_alloc_str", "") or "",
            constraints=item.get("features", "") or "",
            submit_time=_time(item.get("submit_time")),
            start_time=_time(item.get("start_time")),
            end_time=_time(item.get("end_time")),
            time_limit_minutes=_number(item.get("time_limit")),
            exit_code=exit_code,
            exit_signal=exit_signal,
            standard_output=item.get("standard_output", "") or "",
            standard_error=item.get("standard_error", "") or "",
            working_directory=item.get("current_working_directory", "") or "",
            gpu_allocation=_gpu_allocation(item.get("nodes", "") or "", item.get("gres_detail") or []),
            array_job_id=_number(item.get("array_job_id")) or None,
            array_task_id=_number(item.get("array_task_id")),
            array_task_string=item.get("array_task_string", "") or "",
            array_max_tasks=_number(item.get("array_max_tasks")) or 0,
        )

    def decode_submitted_job_id(self, payload: Json) -> int:
        return int(payload["job_id"])

    def decode_nodes(self, payload: Json) -> list[Node]:
        nodes = []
        for item in payload.get("nodes", []):
            gres, gres_used = item.get("gres", ""), item.get("gres_used", "")
            shards_total, shards_used = shard_totals(gres, gres_used)
            nodes.append(
                Node(
                    name=item["name"],
                    states=_strings(item.get("state")),
                    reason=item.get("reason", "") or "",
                    features=_strings(item.get("active_features") or item.get("features")),
                    partitions=_strings(item.get("partitions")),
                    cpus=int(item.get("cpus", 0) or 0),
                    alloc_cpus=int(item.get("alloc_cpus", 0) or 0),
                    real_memory_mb=int(item.get("real_memory", 0) or 0),
                    alloc_memory_mb=int(item.get("alloc_memory", 0) or 0),
                    gpus=gpu_groups(gres, gres_used),
                    shards_total=shards_total,
                    shards_used=shards_used,
                    nvme_gb=sum(item.count for item in parse_gres(gres) if item.name == "nvme"),
                    address=str(item.get("address") or "")[:255],
                    boot_time=_time(item.get("boot_time")),
                )
            )
        return nodes

    def decode_partitions(self, payload: Json) -> list[Partition]:
        partitions = []
        for item in payload.get("partitions", []):
            state = _strings((item.get("partition") or {}).get("state"))
            partitions.append(
                Partition(
                    name=item["name"],
                    nodes=(item.get("nodes") or {}).get("configured", ""),
                    state=state[0] if state else "UNKNOWN",
                    max_time_minutes=_number((item.get("maximums") or {}).get("time")),
                    default_time_minutes=_number((item.get("defaults") or {}).get("time")),
                    total_cpus=int((item.get("cpus") or {}).get("total", 0) or 0),
                )
            )
        return partitions

    def decode_reservations(self, payload: Json) -> list[Reservation]:
        return [
            Reservation(
                name=item["name"],
                users=_strings(item.get("users")),
                nodes=item.get("node_list", "") or "",
                start_time=_time(item.get("start_time")),
                end_time=_time(item.get("end_time")),
                tres=item.get("tres", "") or "",
                flags=_strings(item.get("flags")),
            )
            for item in payload.get("reservations", [])
        ]

    def decode_controller_responding(self, payload: Json) -> bool:
        return any(item.get("pinged") == "UP" for item in payload.get("pings", []))

    def decode_accounting(self, payload: Json) -> list[AccountingRecord]:
        records = []
        for item in payload.get("jobs", []):
            times = item.get("time") or {}
            allocated = {}
            for tres in (item.get("tres") or {}).get("allocated", []):
                key = tres["type"] + (f"/{tres['name']}" if tres.get("name") else "")
                allocated[key] = int(tres.get("count", 0))
            exit_code, _signal = _exit(item.get("exit_code"))
            array = item.get("array") or {}
            array_job_id = _number(array.get("job_id")) or None
            task_id = _number(array.get("task_id"))
            if array_job_id is None:
                task_ids: tuple[int, ...] = ()
            elif task_id is not None:
                task_ids = (task_id,)
            else:
                task_ids = tuple(bitmap_task_ids(str(array.get("task") or "")))
            records.append(
                AccountingRecord(
                    job_id=int(item["job_id"]),
                    user_name=item.get("user", ""),
                    account=item.get("account", ""),
                    qos=item.get("qos", ""),
                    states=_strings((item.get("state") or {}).get("current")),
                    submit_time=_time(times.get("submission")),
                    start_time=_time(times.get("start")),
                    end_time=_time(times.get("end")),
                    elapsed_seconds=int(times.get("elapsed", 0) or 0),
                    allocated_tres=allocated,
                    nodes=item.get("nodes", "") or "",
                    exit_code=exit_code,
                    array_job_id=array_job_id,
                    array_task_ids=task_ids,
                    **_step_usage(item.get("steps") or []),
                    name=str(item.get("name") or "")[:200],
                    comment=str((item.get("comment") or {}).get("job") or "")[:500],
                )
            )
        return records
