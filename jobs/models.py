import uuid

from django.conf import settings
from django.db import models

from cluster.clusters.registry import primary_cluster_name
from cluster.records.gres import gpus_held
from cluster.records.types import TERMINAL_JOB_STATES
from jobs.diagnosis.reasons import explain_reason, short_reason


class JobState(models.TextChoices):
    # Portal-only states, before Slurm has the job.
    SUBMITTING = "SUBMITTING", "Submitting"
    SUBMIT_FAILED = "SUBMIT_FAILED", "Submission failed"
    # Slurm's base states.
    PENDING = "PENDING", "Pending"
    RUNNING = "RUNNING", "Running"
    SUSPENDED = "SUSPENDED", "Suspended"
    COMPLETING = "COMPLETING", "Completing"
    COMPLETED = "COMPLETED", "Completed"
    CANCELLED = "CANCELLED", "Cancelled"
    FAILED = "FAILED", "Failed"
    TIMEOUT = "TIMEOUT", "Time limit reached"
    NODE_FAIL = "NODE_FAIL", "Node failure"
    PREEMPTED = "PREEMPTED", "Preempted"
    BOOT_FAIL = "BOOT_FAIL", "Boot failure"
    DEADLINE = "DEADLINE", "Deadline reached"
    OUT_OF_MEMORY = "OUT_OF_MEMORY", "Out of memory"
    UNKNOWN = "UNKNOWN", "Unknown"


def state_label(state: str) -> str:
    """A job's state in words ("Time limit reached"); Slurm's term stays in `Job.state`."""
    return JobState(state).label if state in JobState.values else state.capitalize()


FINAL_STATES = frozenset(TERMINAL_JOB_STATES | {JobState.SUBMIT_FAILED})
# Rows the mirror still has to read: unfinished, or told ended by an event (the state written at
# once, Slurm's signature left empty) and not read since (exit code, nodes, exact times).
UNREAD_OR_UNFINISHED = ~models.Q(state__in=FINAL_STATES) | models.Q(slurm_states="", slurm_job_id__isnull=False)


class JobQuerySet(models.QuerySet):
    def on_cluster(self, name: str | None = None):
        """The jobs of one cluster (the portal's own by default): Slurm job ids repeat across
        clusters, so every lookup by a Slurm job id goes through this."""
        return self.filter(cluster=name or primary_cluster_name())


class Job(models.Model):
    """A Slurm job as the portal knows it: submitted here, or seen by the mirror."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    # The cluster it runs on (cluster/clusters/registry.py: SLURM_CLUSTER_NAME for the portal's own, or a
    # CLUSTERS_FILE entry's name); its Slurm job id is unique within that cluster only.
    cluster = models.CharField(max_length=32, default=primary_cluster_name)
    # Why it runs there, for its owner: the estimates compared when the spec said `any`
    # (cluster/clusters/placement.py), or that the spec named it; empty: the portal's own by default.
    placement = models.CharField(max_length=500, blank=True)
    # Placed by the portal (`any`) and not moved yet: a waiting job may move once to a cluster
    # where it would start JOB_MOVE_MARGIN_MINUTES sooner (jobs/moves.py); False once it did,
    # or once a move was tried.
    movable = models.BooleanField(default=False)
    moved_from = models.CharField(max_length=32, blank=True)
    moved_at = models.DateTimeField(null=True, blank=True)
    slurm_job_id = models.BigIntegerField(null=True, blank=True)
    cluster_user = models.CharField(max_length=64, blank=True)
    name = models.CharField(max_length=200, blank=True)
    account = models.CharField(max_length=64, blank=True)
    partition = models.CharField(max_length=64, blank=True)
    qos = models.CharField(max_length=64, blank=True)
    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.SUBMITTING)
    # Slurm's full state list ("CANCELLED,COMPLETING"): the mirror's change detector.
    slurm_states = models.CharField(max_length=200, blank=True)
    state_reason = models.CharField(max_length=200, blank=True)
    nodes = models.CharField(max_length=500, blank=True)
    tres_per_node = models.CharField(max_length=200, blank=True)
    allocated_tres = models.CharField(max_length=500, blank=True)
    # {"gpu-a100-01": [1, 2]}: which GPUs the job holds, for the heatmap.
    gpu_allocation = models.JSONField(default=dict, blank=True)
    constraints = models.CharField(max_length=200, blank=True)
    comment = models.CharField(max_length=500, blank=True)
    submit_time = models.DateTimeField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    time_limit_minutes = models.IntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    standard_output = models.CharField(max_length=500, blank=True)
    standard_error = models.CharField(max_length=500, blank=True)
    # From slurmdbd once the job is finished.
    elapsed_seconds = models.IntegerField(null=True, blank=True)
    # From slurmdbd too, where jobacct_gather sampled the run: CPU time of all steps, and the most
    # resident memory one step held (null: not sampled, never 0).
    cpu_seconds = models.IntegerField(null=True, blank=True)
    host_memory_peak_mb = models.IntegerField(null=True, blank=True)
    # How the portal right-sized the ask when it was accepted (jobs/right_size.py; the plan shrinks
    # for repeated low GPU memory use): empty when it asked for what it asked.
    # db_default: the release before this column still inserts rows while this one migrates (expand first).
    right_sized = models.JSONField(default=dict, db_default=models.Value({}, models.JSONField()), blank=True)
    # The GPUs the job holds, or asks for before Slurm allocated any (cluster.records.gres.gpus_held):
    # the request's when the row is born (save()), overwritten from the allocation by the mirror
    # (jobs/mirror/) once Slurm reports one. Shards sit on part of a GPU: such a job counts the
    # GPUs they sit on. What it counts against the plan's quota is `quota_gpus` and `quota_shards`.
    gpu_count = models.IntegerField(null=True, blank=True)
    # slurmdbd can lag slurmctld: the mirror asks again on later passes, a bounded number of times.
    accounting_attempts = models.PositiveSmallIntegerField(default=0)
    # What the user asked for (jobs.submission.spec.JobSpec.to_dict()); empty for jobs seen only in Slurm.
    spec = models.JSONField(default=dict, blank=True)
    # The GPU reservation the job runs in (jobs.actions.submit checks it is the owner's).
    reservation = models.ForeignKey(
        "reservations.Reservation", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    # The group the job is charged to: it runs with the group's Slurm account (`account`).
    # Set from the account for jobs submitted outside the portal too (jobs/mirror/rows.py).
    group = models.ForeignKey("groups.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs")
    # When the owner shared this group job's logs with the group's PI and managers (None: not
    # shared; they see its state, never its output, until then).
    logs_shared_at = models.DateTimeField(null=True, blank=True)
    # An operational job's own script and placement (GPU diagnostics and resets): written by
    # the portal's code, never from user input; such a job has no `spec` and is never cloned.
    pinned = models.JSONField(default=dict, blank=True)
    image = models.CharField(max_length=300, blank=True)
    gpu_type = models.CharField(max_length=32, blank=True)
    # What this job counts against the concurrent GPU quota: whole GPUs, or for a GPU-memory
    # job its shards (a share of one GPU: jobs.submission.quota adds shares up to whole GPUs).
    quota_gpus = models.PositiveSmallIntegerField(default=0)
    quota_shards = models.PositiveSmallIntegerField(default=0)
    submit_attempts = models.PositiveSmallIntegerField(default=0)
    # A worker that claims the submission owns it until then; after that the reconciler may retry.
    submit_claimed_until = models.DateTimeField(null=True, blank=True)
    # What went wrong, in words the owner may read; the technical detail (URLs, paths,
    # commands) is for admins only.
    error = models.TextField(blank=True)
    error_detail = models.TextField(blank=True)
    # A task of a sweep (sweeps/): its point's index in the sweep, and the Slurm array
    # that runs it with its task id there. A task reaches Slurm with its array (JobArray's claim),
    # never alone; it has a `slurm_job_id` once Slurm gave the task a record of its own.
    sweep = models.ForeignKey("Sweep", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks")
    sweep_index = models.PositiveIntegerField(null=True, blank=True)
    # False once the point was run again (a rerun's row is the current one; this one is history).
    sweep_current = models.BooleanField(default=True)
    array = models.ForeignKey("JobArray", null=True, blank=True, on_delete=models.CASCADE, related_name="tasks")
    array_task_id = models.PositiveIntegerField(null=True, blank=True)
    # The task's metric (metrics.json or a marked line: sweeps/metrics.py), once it ended.
    metric = models.FloatField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        indexes = [
            models.Index(fields=["owner", "-created_at", "-id"]),
            models.Index(fields=["state"]),
            models.Index(fields=["sweep", "sweep_index"]),
        ]
        constraints = [
            models.UniqueConstraint(fields=["array", "array_task_id"], name="a_task_id_once_per_array"),
            models.UniqueConstraint(fields=["cluster", "slurm_job_id"], name="a_slurm_job_id_once_per_cluster"),
        ]
        ordering = ["-created_at"]

    def __str__(self):
        return f"job {self.slurm_job_id or self.uuid} ({self.state})"

    def save(self, *args, **kwargs):
        if self.gpu_count is None:
            self.gpu_count = gpus_held(self.allocated_tres, self.gpu_allocation, self.tres_per_node)
        super().save(*args, **kwargs)

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def reason_text(self) -> str:
        return explain_reason(self.state_reason)

    @property
    def reason_short(self) -> str:
        return short_reason(self.state_reason)

    @property
    def state_label(self) -> str:
        return state_label(self.state)


class JobTemplate(models.Model):
    """A named, reusable job spec of one user."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="job_templates")
    name = models.CharField(max_length=64)
    spec = models.JSONField()
    # An interactive session's template (interactive/kinds.py: its app); blank for a job's. Each
    # kind's form lists its own.
    kind = models.CharField(max_length=32, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="unique_template_name_per_user")]
        ordering = ["name"]

    def __str__(self):
        return self.name


class ContainerStart(models.Model):
    """How long one job's container took to start on its node (jobs/container_starts.py)."""

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="container_start")
    image = models.CharField(max_length=300)
    node = models.CharField(max_length=100)
    seconds = models.DecimalField(max_digits=9, decimal_places=3)
    launched_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["image", "node", "launched_at"])]

    def __str__(self):
        return f"{self.image} on {self.node}: {self.seconds} s"


class JobDataset(models.Model):
    """A dataset version a job mounts read-only at /data/<name>, and how its staging went on
    the job's node (the node tool's lines in the job's output: jobs/dataset_staging.py)."""

    class Warmth(models.TextChoices):
        WARM = "warm"  # the node held a verified copy: nothing copied
        COLD = "cold"  # copied from the store to the node's NVMe, then checked

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="datasets")
    version = models.ForeignKey("datasets.DatasetVersion", on_delete=models.PROTECT, related_name="job_mounts")
    name = models.CharField(max_length=80)
    size_bytes = models.PositiveBigIntegerField()
    # Filled in from the staging lines once the job runs.
    node = models.CharField(max_length=64, blank=True)
    warmth = models.CharField(max_length=8, choices=Warmth.choices, blank=True)
    copied_bytes = models.PositiveBigIntegerField(default=0)
    staging_seconds = models.DecimalField(max_digits=10, decimal_places=3, null=True, blank=True)
    ready_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["job", "name"]
        constraints = [
            models.UniqueConstraint(fields=["job", "version"], name="a_version_once_per_job"),
            models.UniqueConstraint(fields=["job", "name"], name="a_mount_name_once_per_job"),
        ]

    def __str__(self):
        return f"{self.name} for {self.job}"

    @property
    def progress_percent(self) -> int:
        if self.ready_at or not self.size_bytes:
            return 100 if self.ready_at else 0
        return min(99, self.copied_bytes * 100 // self.size_bytes)


class Sweep(models.Model):
    """A grid of runs of one base job (sweeps/): every point a task, run as Slurm job arrays."""

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sweeps")
    group = models.ForeignKey("groups.Group", null=True, blank=True, on_delete=models.PROTECT, related_name="sweeps")
    name = models.CharField(max_length=64)
    # The base job as accepted (JobSpec.to_dict(); its command is the template with `{name}`s).
    spec = models.JSONField()
    # sweeps.parameters.Grid.to_dict(): the names and every point's values.
    grid = models.JSONField()
    point_count = models.PositiveIntegerField()
    # Tasks Slurm runs at once (its ArrayTaskThrottle; 0: no limit but the plan's).
    throttle = models.PositiveIntegerField(default=0)
    # The metric to compare tasks by, and whether lower is better.
    metric_name = models.CharField(max_length=64, blank=True)
    metric_goal = models.CharField(max_length=3, default="min", choices=[("min", "lowest"), ("max", "highest")])
    cloned_from = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["owner", "-created_at"])]

    def __str__(self):
        return f"sweep {self.name} ({self.point_count} points)"


class JobArray(models.Model):
    """One Slurm job array of a sweep: submitted exactly once, with the same claim protocol as a
    job (sweeps/submit.py). Slurm's task id of a point is its sweep index minus `offset`,
    so no array needs an index of MaxArraySize or more."""

    class State(models.TextChoices):
        SUBMITTING = "SUBMITTING", "Submitting"
        SUBMITTED = "SUBMITTED", "In Slurm"
        SUBMIT_FAILED = "SUBMIT_FAILED", "Submission failed"
        CANCELLED = "CANCELLED", "Cancelled before it reached Slurm"

    uuid = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    sweep = models.ForeignKey(Sweep, on_delete=models.CASCADE, related_name="arrays")
    offset = models.PositiveIntegerField()
    # Slurm's task ids ("0-999", "3,17"), without the throttle.
    task_ids = models.TextField()
    task_count = models.PositiveIntegerField()
    state = models.CharField(max_length=16, choices=State.choices, default=State.SUBMITTING)
    slurm_array_job_id = models.BigIntegerField(unique=True, null=True, blank=True)
    submit_attempts = models.PositiveSmallIntegerField(default=0)
    submit_claimed_until = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True)
    error_detail = models.TextField(blank=True)
    # The mirror's change detector: the array's lines of Slurm's state listing, as last applied.
    listing_signature = models.CharField(max_length=64, blank=True)
    # The sweep's array before this one (`afterany` in Slurm: the throttle holds across arrays);
    # None for the first, and for a rerun's.
    depends_on = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["sweep", "pk"]

    def __str__(self):
        return f"array {self.slurm_array_job_id or self.uuid} of {self.sweep_id}"
