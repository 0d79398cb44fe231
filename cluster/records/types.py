"""The portal's own view of Slurm objects, independent of any REST API version.

Adapters in `cluster.slurmrest` translate each API version's JSON into these types;
nothing outside `cluster/` ever reads Slurm's JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

# Slurm base states after which a job never changes again.
TERMINAL_JOB_STATES = frozenset(
    {
        "BOOT_FAIL",
        "CANCELLED",
        "COMPLETED",
        "DEADLINE",
        "FAILED",
        "NODE_FAIL",
        "OUT_OF_MEMORY",
        "PREEMPTED",
        "TIMEOUT",
    }
)

# The state flag slurmdbd puts on a requeued job's earlier run ("PENDING", "REQUEUED").
REQUEUED_FLAG = "REQUEUED"


# What slurmdbd records as the nodes of a run that never started.
NOT_STARTED_NODES = frozenset({"", "None assigned", "(null)"})


@dataclass(frozen=True)
class GpuGroup:
    """GPUs of one type on one node, and which of them are allocated."""

    gpu_type: str
    count: int
    used_indexes: tuple[int, ...] = ()

    @property
    def used(self) -> int:
        return len(self.used_indexes)


@dataclass(frozen=True)
class Node:
    name: str
    states: tuple[str, ...]
    reason: str
    features: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int
    alloc_cpus: int
    real_memory_mb: int
    alloc_memory_mb: int
    gpus: tuple[GpuGroup, ...]
    shards_total: int
    shards_used: int
    # The node's NVMe cache in GB (the count-only gres/nvme), 0 where it declares none.
    nvme_gb: int = 0
    # Where the portal reaches the node (Slurm's NodeAddr): an interactive session's server.
    address: str = ""
    # When the node last booted (a dev-cluster node's slurmd started as a boot): a reboot asked of
    # Slurm is done once this is later than the asking (console/actions/rolling_restart.py).
    boot_time: datetime | None = None

    @property
    def state(self) -> str:
        return self.states[0] if self.states else "UNKNOWN"

    @property
    def gpu_count(self) -> int:
        return sum(group.count for group in self.gpus)


@dataclass(frozen=True)
class JobStateEntry:
    """One line of the cheap `jobs/state/` listing.

    A task of a job array is listed as "<record id>_<task id>" ("14_3"): a task with a record of
    its own (started, ended) under that record's job id, the array's tasks without one (pending)
    under the array's id, each with its task id or as Slurm's set of them ("12_[4-23%4]" with
    the throttle). `job_id` is the record's id, `array_task` what follows the underscore
    (payloads captured from both generations: cluster/tests/payloads/*/array_jobs_state.json)."""

    job_id: int
    states: tuple[str, ...]
    array_task: str = ""

    @property
    def state(self) -> str:
        return self.states[0] if self.states else "UNKNOWN"


@dataclass(frozen=True)
class Job:
    job_id: int
    name: str
    user_name: str
    account: str
    partition: str
    qos: str
    states: tuple[str, ...]
    state_reason: str
    comment: str
    nodes: str
    tres_per_node: str
    allocated_tres: str
    constraints: str
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    time_limit_minutes: int | None
    exit_code: int | None
    exit_signal: int | None
    standard_output: str
    standard_error: str
    working_directory: str
    # GPU indexes held on each node, e.g. {"gpu-a100-01": (1, 2)}; empty unless allocated.
    gpu_allocation: dict[str, tuple[int, ...]] = field(default_factory=dict)
    # A job array's task: the array's id, the task's id in it (None for the record of the
    # tasks not yet started, whose ids are `array_task_string`, "4-23%4" with its throttle).
    array_job_id: int | None = None
    array_task_id: int | None = None
    array_task_string: str = ""
    # Slurm's ArrayTaskThrottle of the array (0: none).
    array_max_tasks: int = 0

    @property
    def state(self) -> str:
        return self.states[0] if self.states else "UNKNOWN"

    @property
    def is_array_task(self) -> bool:
        return bool(self.array_job_id)

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_JOB_STATES


@dataclass(frozen=True)
class Partition:
    name: str
    nodes: str
    state: str
    max_time_minutes: int | None
    default_time_minutes: int | None
    total_cpus: int


@dataclass(frozen=True)
class Reservation:
    name: str
    users: tuple[str, ...]
    nodes: str
    start_time: datetime | None
    end_time: datetime | None
    tres: str
    flags: tuple[str, ...]


@dataclass(frozen=True)
class AccountingRecord:
    """A job as slurmdbd recorded it: what billing and operations figures read."""

    job_id: int
    user_name: str
    account: str
    qos: str
    states: tuple[str, ...]
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    elapsed_seconds: int
    allocated_tres: dict[str, int]
    nodes: str
    exit_code: int | None
    # A job array's task: the array's id, and the task ids the record covers (one task that ran;
    # for the array's record, the tasks that never had a record of their own).
    array_job_id: int | None = None
    array_task_ids: tuple[int, ...] = ()
    # CPU time of all its steps, and the most resident memory one step held (bytes): None where
    # slurmdbd has no steps, or no memory sample (a step shorter than JobAcctGatherFrequency).
    cpu_seconds: int | None = None
    max_rss_bytes: int | None = None
    # The job's name, and its comment where slurmdbd keeps comments (AccountingStoreFlags=job_comment):
    # a restore's reconcile finds the portal's own jobs by it (gpupool/reconcile.py).
    name: str = ""
    comment: str = ""

    @property
    def state(self) -> str:
        return self.states[0] if self.states else "UNKNOWN"

    @property
    def gpu_count(self) -> int:
        return self.allocated_tres.get("gres/gpu", 0)

    @property
    def ran_on(self) -> str:
        """The nodes the run held, "" when it never ran (slurmdbd writes "None assigned")."""
        return "" if self.nodes in NOT_STARTED_NODES else self.nodes

    @property
    def nvme_gb(self) -> int:
        """GB of NVMe cache the run held (the count-only GRES `gres/nvme`), 0 without one."""
        return max(0, self.allocated_tres.get("gres/nvme", 0))

    @property
    def is_settled(self) -> bool:
        """slurmdbd has the whole run of a finished job. It hears of a job's start and end in
        separate messages and may record the end first (seen on 24.11 for an 8 s job:
        COMPLETED with elapsed 0 and no allocated TRES, fixed a few seconds later), so an
        ended run whose elapsed time disagrees with its start and end, or that holds no TRES,
        is not final yet."""
        return self.state in TERMINAL_JOB_STATES and self._whole_run_recorded()

    @property
    def run_is_settled(self) -> bool:
        """Like `is_settled`, for every run, a requeued job's earlier runs too: what billing
        meters. slurmdbd keeps a requeued job's earlier run as a record of its own, with its
        start, end and elapsed time and the states ["PENDING", "REQUEUED"] (seen on 24.11);
        the next run is another record under the same job id."""
        run_is_over = self.state in TERMINAL_JOB_STATES or REQUEUED_FLAG in self.states
        return run_is_over and self._whole_run_recorded()

    def _whole_run_recorded(self) -> bool:
        if self.end_time is None:
            return False
        if self.start_time is None:
            return True  # ended before it ever ran: nothing was used
        span = (self.end_time - self.start_time).total_seconds()
        return abs(span - self.elapsed_seconds) <= 1 and bool(self.allocated_tres)

    @property
    def gpu_seconds(self) -> int:
        return self.elapsed_seconds * self.gpu_count


@dataclass(frozen=True)
class JobSubmission:
    """What the portal asks Slurm to run. Every field is data, never shell text."""

    name: str
    script: str
    working_directory: str
    standard_output: str
    standard_error: str
    environment: dict[str, str] = field(default_factory=dict)
    partition: str = ""
    account: str = ""
    qos: str = ""
    time_limit_minutes: int | None = None
    # e.g. "gres/gpu:a100:1" or "gres/shard:a100:3"
    tres_per_node: str = ""
    constraints: str = ""
    # Soft node features (`--prefer`): nodes that have them are chosen first, others still serve.
    prefer: str = ""
    reservation: str = ""
    comment: str = ""
    requeue: bool = True
    required_nodes: tuple[str, ...] = ()
    # A job array's task ids with the throttle ("0-23%4"): one script, one record per task.
    array: str = ""
    # Another job that must end first ("afterany:123").
    dependency: str = ""
    cpus_per_task: int = 1
    memory_per_node_mb: int | None = None
