import re
from datetime import datetime

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from jobs.costs import JobCost, cost_for, costs_for, money
from jobs.diagnosis.reasons import explain_reason
from jobs.efficiency import efficiencies_for, efficiency_for
from jobs.models import Job, JobDataset
from jobs.submission.spec import IMAGE_RE, MAX_DATASETS, MAX_IMAGE_CHARS, NAME_RE

MONEY_HELP = "USD as a decimal string, exact (not rounded to the cent)"


class CostDetailSerializer(serializers.Serializer):
    """How a job's cost comes about (jobs.costs.CostDetail; the rules: billing/costs.py)."""

    basis = serializers.ChoiceField(
        choices=["metered", "estimate"],
        help_text="metered: from Slurm's accounting of each run, as charged; estimate: the time so far",
    )
    runs = serializers.IntegerField(help_text="Runs metered and charged (a requeued job has one per run)")
    plan = serializers.CharField(help_text="The plan the usage is priced under")
    gpu_seconds = serializers.IntegerField()
    included_gpu_seconds = serializers.IntegerField(help_text="Covered by the plan's included hours")
    credit_gpu_seconds = serializers.IntegerField(help_text="Covered by credits")
    billable_gpu_seconds = serializers.IntegerField()
    amount_gpu = serializers.CharField(help_text=MONEY_HELP)
    amount_memory = serializers.CharField(help_text=MONEY_HELP)
    amount_nvme = serializers.CharField(help_text=MONEY_HELP)
    note = serializers.CharField(allow_blank=True)
    preempted_runs = serializers.IntegerField(help_text="Runs ended by preemption (spot), each requeued")
    preempted_gpu_seconds = serializers.IntegerField(help_text="GPU-seconds of those runs: lost unless checkpointed")

    def to_representation(self, detail):
        return {
            "basis": detail.basis,
            "runs": detail.runs,
            "plan": detail.plan,
            "gpu_seconds": detail.gpu_seconds,
            "included_gpu_seconds": detail.included_gpu_seconds,
            "credit_gpu_seconds": detail.credit_gpu_seconds,
            "billable_gpu_seconds": detail.billable_gpu_seconds,
            "amount_gpu": money(detail.amount_gpu),
            "amount_memory": money(detail.amount_memory),
            "amount_nvme": money(detail.amount_nvme),
            "note": detail.note,
            "preempted_runs": detail.preempted_runs,
            "preempted_gpu_seconds": detail.preempted_gpu_seconds,
        }


class EfficiencySerializer(serializers.Serializer):
    """How a finished job used its GPUs (jobs.efficiency; the figures: telemetry/efficiency.py)."""

    gpu_util_mean = serializers.FloatField(help_text="Mean GPU compute utilisation over the run, percent")
    gpu_util_peak = serializers.FloatField(help_text="Highest minute's GPU compute utilisation, percent")
    gpu_memory_peak_gb = serializers.FloatField(help_text="The most GPU memory one of its GPUs held, GB")
    gpu_memory_asked_gb = serializers.FloatField(
        allow_null=True, help_text="What it asked per GPU: a share's GB, or the whole card's"
    )
    idle_fraction = serializers.FloatField(help_text="Share of its GPU-minutes under the idle line (0 to 1)")
    gpu_minutes = serializers.IntegerField(help_text="GPU-minutes of telemetry the figures stand on")
    shared_gpu = serializers.BooleanField(
        help_text="It ran on a share of a GPU: the figures are the card's, every sharer's together"
    )
    cpu_efficiency = serializers.FloatField(
        allow_null=True,
        help_text="CPU time over elapsed time times its CPUs (0 to 1), from Slurm's accounting; null where "
        "Slurm sampled none",
    )
    host_memory_peak_gb = serializers.FloatField(
        allow_null=True, help_text="The most host memory one of its steps held, GB; null where Slurm sampled none"
    )
    host_memory_asked_gb = serializers.FloatField(allow_null=True, help_text="The host memory it was allocated, GB")


class RightSizedSerializer(serializers.Serializer):
    """How the plan's right-sizing changed a job's ask (jobs/right_size.py)."""

    asked_gpus = serializers.IntegerField(help_text="The whole GPUs asked for")
    whole_gpu_gb = serializers.IntegerField(help_text="One whole GPU's memory, GB")
    share_gb = serializers.IntegerField(help_text="The share of a GPU it was given instead, GB")
    peak_gb = serializers.FloatField(help_text="The highest GPU memory peak of the jobs it was judged on, GB")
    evidence_jobs = serializers.ListField(
        child=serializers.IntegerField(), help_text="Those jobs' ids: the owner's last one-GPU jobs of the type"
    )
    plan = serializers.CharField(help_text="The plan whose rule shrank it")


EFFICIENCY_FIELDS = tuple(EfficiencySerializer._declared_fields)


class JobListSerializer(serializers.ListSerializer):
    """Asks for the costs of a page of jobs at once (a fixed number of queries)."""

    def to_representation(self, data):
        jobs = list(data.all() if hasattr(data, "all") else data)
        costs = costs_for(jobs)
        self.child.known_costs = {job.pk: costs.get(job.pk) for job in jobs}
        found = efficiencies_for(jobs)
        self.child.known_efficiencies = {job.pk: found.get(job.pk) for job in jobs}
        # The page's dataset mounts in one query (a prefetch builds a queryset per job).
        mounts: dict[int, list[JobDataset]] = {job.pk: [] for job in jobs}
        for mount in JobDataset.objects.filter(job__in=jobs).select_related("version"):
            mounts[mount.job_id].append(mount)
        self.child.known_mounts = mounts
        return super().to_representation(jobs)


class JobDatasetSerializer(serializers.ModelSerializer):
    version = serializers.IntegerField(source="version_id", help_text="The dataset version's id")
    dataset = serializers.IntegerField(source="version.dataset_id", help_text="The dataset's id")
    number = serializers.IntegerField(source="version.number", help_text="The version's number in its dataset")
    mounted_at = serializers.SerializerMethodField(help_text="Where the job reads it: /data/<name>")
    warmth = serializers.CharField(
        help_text="warm: the node held a verified copy; cold: copied to the node's NVMe for this job; "
        "empty until the job has staged it"
    )

    class Meta:
        model = JobDataset
        fields = [
            "version",
            "dataset",
            "number",
            "name",
            "mounted_at",
            "size_bytes",
            "node",
            "warmth",
            "copied_bytes",
            "staging_seconds",
            "ready_at",
        ]
        read_only_fields = fields

    def get_mounted_at(self, mount) -> str:
        return f"/data/{mount.name}"


class JobSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(read_only=True)
    reason = serializers.SerializerMethodField()
    expected_start = serializers.SerializerMethodField()
    expected_end = serializers.SerializerMethodField()
    elapsed_seconds_so_far = serializers.SerializerMethodField()
    exit_code = serializers.SerializerMethodField()
    gpu_count = serializers.SerializerMethodField()
    spec = serializers.DictField(
        read_only=True, help_text="What was submitted (the submission's fields); empty for jobs seen only in Slurm"
    )
    cost = serializers.SerializerMethodField(
        help_text="What the job cost, USD as an exact decimal string: the sum of its runs' charges, once it has "
        "ended and every run is metered and charged; null before that"
    )
    cost_so_far = serializers.SerializerMethodField(
        help_text="While it runs: an estimate, USD as a decimal string (runs charged so far plus the run in "
        "progress at the plan's prices; cost_detail.note says what it leaves out); null otherwise"
    )
    cost_detail = serializers.SerializerMethodField(
        help_text="How cost or cost_so_far comes about (plan hours, credits, billable); null when both are null"
    )
    datasets = JobDatasetSerializer(many=True, read_only=True, help_text="The dataset versions it mounts")
    efficiency = serializers.SerializerMethodField(
        help_text="How it used its GPUs, once it has ended and telemetry covered its run; null otherwise"
    )
    right_sized = serializers.SerializerMethodField(
        help_text="When the plan gave it a share of a GPU instead of the whole GPU asked for: how and why; "
        "null when it runs as asked (send keep_whole_gpu to insist on the whole GPU)"
    )

    class Meta:
        model = Job
        list_serializer_class = JobListSerializer
        fields = [
            "id",
            "uuid",
            "cluster",
            "placement",
            "slurm_job_id",
            "name",
            "state",
            "state_reason",
            "reason",
            "image",
            "gpu_type",
            "tres_per_node",
            "allocated_tres",
            "nodes",
            "qos",
            "account",
            "group",
            "time_limit_minutes",
            "submit_time",
            "start_time",
            "end_time",
            "expected_start",
            "expected_end",
            "elapsed_seconds_so_far",
            "exit_code",
            "elapsed_seconds",
            "gpu_count",
            "cost",
            "cost_so_far",
            "cost_detail",
            "efficiency",
            "right_sized",
            "error",
            "spec",
            "datasets",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def to_representation(self, job):
        """The fields above, written out: the job list's page of 200 is most of its time in DRF's
        per-field machinery otherwise (about 0.2 ms a row). Same output, field for field, as the
        declared fields give (jobs/tests/test_api_job_representation.py checks it for jobs of every
        shape); a field added to Meta.fields must be added here too, which that test says."""
        fields = self.fields
        known_mounts = getattr(self, "known_mounts", None)
        datasets = known_mounts[job.pk] if known_mounts is not None else list(job.datasets.all())
        return {
            "id": job.pk,
            "uuid": str(job.uuid),
            "cluster": job.cluster,
            "placement": job.placement,
            "slurm_job_id": job.slurm_job_id,
            "name": job.name,
            "state": job.state,
            "state_reason": job.state_reason,
            "reason": self.get_reason(job),
            "image": job.image,
            "gpu_type": job.gpu_type,
            "tres_per_node": job.tres_per_node,
            "allocated_tres": job.allocated_tres,
            "nodes": job.nodes,
            "qos": job.qos,
            "account": job.account,
            "group": job.group_id,
            "time_limit_minutes": job.time_limit_minutes,
            "submit_time": _when(job.submit_time),
            "start_time": _when(job.start_time),
            "end_time": _when(job.end_time),
            "expected_start": self.get_expected_start(job),
            "expected_end": self.get_expected_end(job),
            "elapsed_seconds_so_far": self.get_elapsed_seconds_so_far(job),
            "exit_code": self.get_exit_code(job),
            "elapsed_seconds": job.elapsed_seconds,
            "gpu_count": self.get_gpu_count(job),
            "cost": self.get_cost(job),
            "cost_so_far": self.get_cost_so_far(job),
            "cost_detail": self.get_cost_detail(job),
            "efficiency": self.get_efficiency(job),
            "right_sized": self.get_right_sized(job),
            "error": job.error,
            "spec": {str(key): value for key, value in job.spec.items()},
            "datasets": fields["datasets"].to_representation(datasets) if datasets else [],
            "created_at": _when(job.created_at),
            "updated_at": _when(job.updated_at),
        }

    def get_reason(self, job) -> str:
        return explain_reason(job.state_reason)

    def get_expected_start(self, job) -> datetime | None:
        # For a pending job Slurm's start_time is the backfill scheduler's estimate.
        return job.start_time if job.state == "PENDING" else None

    def get_expected_end(self, job) -> datetime | None:
        return job.end_time if job.state in {"RUNNING", "PENDING", "SUSPENDED"} else None

    def get_elapsed_seconds_so_far(self, job) -> int | None:
        if job.state == "RUNNING" and job.start_time:
            return max(0, int((timezone.now() - job.start_time).total_seconds()))
        if job.start_time and job.end_time and job.state not in {"PENDING", "SUBMITTING"}:
            return max(0, int((job.end_time - job.start_time).total_seconds()))
        return None

    def get_exit_code(self, job) -> int | None:
        # Slurm reports 0 for a job that is still running: that is no exit code yet.
        return job.exit_code if job.is_final else None

    def get_gpu_count(self, job) -> int:
        return job.gpu_count or 0

    def _cost(self, job) -> JobCost | None:
        # A list serializer fills known_costs for its page; a single job asks on its own, once.
        known = getattr(self, "known_costs", None)
        if known is None:
            known = self.known_costs = {}
        if job.pk not in known:
            known[job.pk] = cost_for(job)
        return known[job.pk]

    def get_cost(self, job) -> str | None:
        cost = self._cost(job)
        return money(cost.cost) if cost else None

    def get_cost_so_far(self, job) -> str | None:
        cost = self._cost(job)
        return money(cost.cost_so_far) if cost else None

    @extend_schema_field(EfficiencySerializer(allow_null=True))
    def get_efficiency(self, job):
        known = getattr(self, "known_efficiencies", None)
        if known is None:
            known = self.known_efficiencies = {}
        if job.pk not in known:
            known[job.pk] = efficiency_for(job)
        figures = known[job.pk]
        return None if figures is None else {name: figures[name] for name in EFFICIENCY_FIELDS}

    @extend_schema_field(RightSizedSerializer(allow_null=True))
    def get_right_sized(self, job):
        return dict(job.right_sized) if job.right_sized else None

    @extend_schema_field(CostDetailSerializer(allow_null=True))
    def get_cost_detail(self, job):
        cost = self._cost(job)
        if cost is None or cost.detail is None:
            return None
        return CostDetailSerializer(cost.detail).data


def _when(value: datetime | None) -> str | None:
    """What serializers.DateTimeField gives (ISO 8601 in the current time zone, UTC as Z)
    without its per-call settings lookups."""
    if value is None:
        return None
    text = value.astimezone(timezone.get_current_timezone()).isoformat()
    return text[:-6] + "Z" if text.endswith("+00:00") else text


def _gpu_types() -> list[str]:
    return list(settings.GPU_TYPES)  # the order of deploy/gpu_types.json


def _most_gpus_per_node() -> int:
    return max((info["per_node"] for info in settings.GPU_TYPES.values()), default=1)


def _most_gpu_memory_gb() -> int:
    return max((info["memory_gb"] for info in settings.GPU_TYPES.values()), default=1)


def _json_schema_pattern(regex: re.Pattern) -> str:
    """A Python regex that jobs.submission.spec fullmatches, as a JSON Schema pattern: anchored (JSON
    Schema patterns search), without Python's named groups."""
    return "^(?:" + re.sub(r"\(\?P<\w+>", "(", regex.pattern) + ")$"


class JobSpecInputSerializer(serializers.Serializer):
    """The body of a submission. For the schema: the API checks the JSON types of these
    fields (jobs.api.views) and jobs.submission.spec.parse_job_spec the values, the plan's rules included."""

    name = serializers.RegexField(
        # "" (like null) means the default name.
        f"^({NAME_RE.pattern})?$",
        required=False,
        allow_null=True,
        help_text="1-64 letters, digits, . _ - (default: job)",
    )
    image = serializers.RegexField(
        _json_schema_pattern(IMAGE_RE),
        max_length=MAX_IMAGE_CHARS,
        help_text="A pinned image: repository:tag (never latest) or repository@sha256:digest",
    )
    gpu_type = serializers.ChoiceField(choices=[], help_text="A GPU type of the pool, as the plan allows")
    gpu_count = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Whole GPUs (up to the most one node of the type has); or give gpu_memory_gb",
    )
    gpu_memory_gb = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="GPU memory (up to one GPU's), mapped to shards of one GPU; or give gpu_count",
    )
    nvme_gb = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=0,
        help_text="NVMe cache on the job's node, in GB (0 or absent: none); billed per GB-hour",
    )
    command = serializers.CharField(min_length=1, help_text="Runs inside the job, never on the portal")
    time_limit_minutes = serializers.IntegerField(min_value=1, help_text="Up to the plan's longest")
    data_mount = serializers.CharField(
        required=False, allow_null=True, allow_blank=True, help_text="A directory under the data roots; at /data"
    )
    environment = serializers.DictField(
        child=serializers.CharField(allow_blank=True), required=False, allow_null=True, help_text="NAME: value"
    )
    spot = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="Run on idle GPUs, preemptible by any plan's job: SIGTERM, SPOT_GRACE_SECONDS to checkpoint, "
        "then requeued; not on the plan's GPU quota; paid plans only; not with a reservation or a group",
    )
    datasets = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**53 - 1),
        required=False,
        allow_null=True,
        max_length=MAX_DATASETS,
        help_text="Dataset version ids (GET /api/v1/datasets/), each mounted read-only at /data/<dataset name>; "
        "staged to the job's node NVMe first (their GB count as the job's NVMe), and the job prefers a node that "
        "holds them; not with data_mount",
    )
    reservation = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Run in this approved reservation of yours (same GPU type; the time limit ends with it)",
    )
    cluster = serializers.CharField(
        required=False,
        allow_null=True,
        max_length=32,
        help_text="Where it runs: a cluster's name (GET /api/v1/clusters/), or any: the cluster where it is "
        "expected to start first (each cluster's scheduler asked; the job's placement says why); absent or null: "
        "the portal's own. Jobs in a reservation, with datasets, spot, a group's, and a capped plan's run on the "
        "portal's own",
    )
    group = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Charge it to this group of yours (it runs with the group's Slurm account); null: to yourself; "
        "absent: your default group, if you set one",
    )
    keep_whole_gpu = serializers.BooleanField(
        required=False,
        allow_null=True,
        help_text="Run on the whole GPU asked for even where the plan right-sizes: a plan may give a one-GPU job "
        "the share of a GPU that the owner's last jobs on the type all fitted (the job's right_sized says so)",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The pool's GPU types are a setting: read them when the schema is made, not at import.
        self.fields["gpu_type"].choices = _gpu_types()
        self.fields["gpu_type"].help_text = "A GPU type of the pool, as the plan allows: " + ", ".join(
            f"{name} ({info['label']}, {info['memory_gb']} GB)" for name, info in settings.GPU_TYPES.items()
        )
        self.fields["gpu_count"].max_value = _most_gpus_per_node()
        self.fields["gpu_memory_gb"].max_value = _most_gpu_memory_gb()
        self.fields["nvme_gb"].max_value = settings.NVME_MAX_GB


def submission_json_types() -> dict[str, type]:
    """The JSON type of each field of a submission, as the schema declares it."""
    types = {}
    for name, field in JobSpecInputSerializer().fields.items():
        if isinstance(field, serializers.BooleanField):
            types[name] = bool
        elif isinstance(field, serializers.IntegerField):
            types[name] = int
        elif isinstance(field, serializers.DictField):
            types[name] = dict
        elif isinstance(field, serializers.ListField):
            types[name] = list
        else:
            types[name] = str
    return types


class JobCloneInputSerializer(JobSpecInputSerializer):
    """Fields that override the original job's; an empty body clones it as it was.
    Send `"gpu_count": null` with `gpu_memory_gb` (or the reverse) to change how GPUs are asked for."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        for field in self.fields.values():
            field.required = False


class DiagnosisSerializer(serializers.Serializer):
    rule_id = serializers.CharField(help_text='A stable slug, e.g. "cuda-oom"')
    title = serializers.CharField()
    cause = serializers.CharField()
    fix = serializers.CharField()
    evidence = serializers.CharField(allow_blank=True, help_text="The matching log line")
    line_number = serializers.IntegerField(help_text="1-based; 0 when it comes from the state or exit code alone")


class LogsSerializer(serializers.Serializer):
    stdout = serializers.CharField(allow_blank=True)
    stderr = serializers.CharField(allow_blank=True)
    stdout_size = serializers.IntegerField()
    stderr_size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    diagnosis = DiagnosisSerializer(many=True)


class UsageSerializer(serializers.Serializer):
    plan = serializers.CharField()
    gpus_in_use_by_type = serializers.DictField(child=serializers.IntegerField(), help_text="Held or queued")
    gpu_quota_by_type = serializers.DictField(child=serializers.IntegerField())
    gpu_seconds_this_month = serializers.IntegerField()
    monthly_gpu_hours = serializers.IntegerField(allow_null=True, help_text="null: no monthly limit")
    jobs_by_state = serializers.DictField(child=serializers.IntegerField())


class ImageSerializer(serializers.Serializer):
    """An image of the pool's catalogue (foundation/images.py) the caller's plan may use."""

    reference = serializers.CharField(help_text="What the job's `image` field takes: repository:tag")
    pinned_reference = serializers.CharField(help_text="repository:tag@sha256:..., what the nodes run")
    title = serializers.CharField()
    framework = serializers.CharField(help_text="pytorch, tensorflow, or none")
    framework_version = serializers.CharField()
    cuda = serializers.CharField(help_text="The CUDA version inside the image")
    python = serializers.CharField()
    min_driver = serializers.CharField(help_text="The oldest NVIDIA driver the image's CUDA runs on")
    host_driver = serializers.CharField(
        help_text='With ?gpu_type: the oldest driver those nodes reported ("": not asked, or none reported)'
    )
    driver_too_old = serializers.BooleanField(
        allow_null=True, help_text="With ?gpu_type: host_driver is older than min_driver (null: unknown)"
    )
