"""GPU telemetry storage, bounded by design:

- GpuLatest: one row per GPU, overwritten on every sample (what the heatmap reads).
- GpuSampleRaw: every sample, kept TELEMETRY_RAW_RETENTION (2 h by default).
- GpuMinute / GpuHour: rollups kept TELEMETRY_MINUTE_RETENTION / TELEMETRY_HOUR_RETENTION.
So the tables grow with the number of GPUs, never with time; the telemetry page shows
their sizes.

Every row names its cluster (`cluster`): "" for the portal's own cluster (so rows written
before there were further clusters stay its own, and renaming SLURM_CLUSTER_NAME orphans
nothing), a further cluster's name (cluster/clusters/registry.py) for its GPUs: node names repeat
across clusters. `objects` reads the portal's own cluster's rows only, as every reader that
knows of one cluster (alerts, idle culling, memory metering) expects; `all_clusters` reads
every cluster's, for what shows each cluster (the heatmap, node and GPU pages) and storage.
"""

import hashlib
import secrets

from django.db import models

from cluster.clusters.registry import primary_cluster_name

OWN_CLUSTER = ""


def cluster_key(name: str | None) -> str:
    """What telemetry rows hold for cluster `name` (None or the own name: the portal's own)."""
    return OWN_CLUSTER if name is None or name == primary_cluster_name() else name


class OwnClusterManager(models.Manager):
    def get_queryset(self):
        return super().get_queryset().filter(cluster=OWN_CLUSTER)


def _cluster_field():
    return models.CharField(max_length=32, blank=True, default=OWN_CLUSTER, help_text="Empty: the portal's own cluster")


# The values of one sample, as GpuSample carries them.
MEASUREMENT_FIELDS = ("compute_util", "memory_util", "memory_used_mb", "memory_total_mb", "temperature_c", "power_w")


class GpuMeasurements(models.Model):
    compute_util = models.FloatField()
    memory_util = models.FloatField()
    memory_used_mb = models.IntegerField()
    memory_total_mb = models.IntegerField()
    temperature_c = models.FloatField()
    power_w = models.FloatField()

    # The first manager is the default one (the admin, dumpdata): every cluster's rows.
    all_clusters = models.Manager()
    objects = OwnClusterManager()

    class Meta:
        abstract = True


class GpuLatest(GpuMeasurements):
    cluster = _cluster_field()
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=100)
    time = models.DateTimeField()
    source = models.CharField(max_length=16, default="nvml")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node", "index"], name="one_latest_sample_per_gpu_of_a_cluster")
        ]

    def __str__(self):
        return f"{self.cluster + ':' if self.cluster else ''}{self.node}/{self.index}"


class GpuSampleRaw(GpuMeasurements):
    time = models.DateTimeField(db_index=True)
    cluster = _cluster_field()
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()

    class Meta:
        indexes = [models.Index(fields=["cluster", "node", "index", "time"], name="telemetry_raw_gpu_time")]

    def __str__(self):
        return f"{self.node}/{self.index} at {self.time}"


class _Rollup(models.Model):
    cluster = _cluster_field()
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    bucket = models.DateTimeField()
    samples = models.IntegerField()
    compute_util = models.FloatField()  # mean
    memory_util = models.FloatField()  # mean
    memory_used_mb = models.IntegerField()  # max: a spike matters more than the mean
    memory_total_mb = models.IntegerField()
    temperature_c = models.FloatField()  # max
    power_w = models.FloatField()  # mean

    all_clusters = models.Manager()
    objects = OwnClusterManager()

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.node}/{self.index} {self.bucket}"


class GpuMinute(_Rollup):
    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["cluster", "node", "index", "bucket"], name="one_minute_per_gpu_of_a_cluster"
            )
        ]
        indexes = [models.Index(fields=["bucket"])]


class GpuHour(_Rollup):
    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["cluster", "node", "index", "bucket"], name="one_hour_per_gpu_of_a_cluster")
        ]
        indexes = [models.Index(fields=["bucket"])]


class NodeToken(models.Model):
    """The credential of one node's agent: it may send samples for that node of that cluster only."""

    PREFIX = "gpn_"

    cluster = _cluster_field()
    node = models.CharField(max_length=100)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["cluster", "node"], name="one_token_per_node_of_a_cluster")]

    def __str__(self):
        return f"{self.node} ({self.cluster})" if self.cluster else self.node

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, node: str, cluster: str = OWN_CLUSTER) -> str:
        """A new key for the node's agent (`cluster` as telemetry rows hold it: `cluster_key`)."""
        key = cls.PREFIX + secrets.token_urlsafe(32)
        cls.objects.update_or_create(cluster=cluster, node=node, defaults={"key_hash": cls.hash_key(key)})
        return key


class JobEfficiency(models.Model):
    """How a finished job used its GPUs, from the telemetry of its run (telemetry/efficiency.py):
    computed once when it ends, while the minute roll-ups still cover its run, and kept after they go."""

    job = models.OneToOneField("jobs.Job", on_delete=models.CASCADE, related_name="efficiency")
    computed_at = models.DateTimeField()
    # Minutes of the run that telemetry covered, GPU by GPU (a GPU-minute per GPU and minute).
    gpu_minutes = models.IntegerField()
    gpu_util_mean = models.FloatField(null=True)  # percent, over the run and the job's GPUs
    gpu_util_peak = models.FloatField(null=True)
    gpu_memory_peak_gb = models.FloatField(null=True)  # the largest on one GPU
    gpu_memory_asked_gb = models.FloatField(null=True)  # per GPU: a share's, or the whole card's
    idle_fraction = models.FloatField(null=True)  # of GPU-minutes under SESSION_IDLE_GPU_PERCENT
    # The GPU was shared with other jobs (shards): its figures are the card's, every sharer's together.
    shared_gpu = models.BooleanField(default=False)
    # Up to SERIES_POINTS (minute, mean compute %, peak memory GB) for the job page's chart.
    series = models.JSONField(default=list)

    def __str__(self):
        return f"job {self.job_id}: {self.gpu_util_mean} % mean"
