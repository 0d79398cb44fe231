"""GPU telemetry storage, bounded by design:

- GpuLatest: one row per GPU, overwritten on every sample (what the heatmap reads).
- GpuSampleRaw: every sample, kept TELEMETRY_RAW_RETENTION (2 h by default).
- GpuMinute / GpuHour: rollups kept TELEMETRY_MINUTE_RETENTION / TELEMETRY_HOUR_RETENTION.
So the tables grow with the number of GPUs, never with time; the telemetry page shows
their sizes.
"""

import hashlib
import secrets

from django.db import models

# The values of one sample, as GpuSample carries them.
MEASUREMENT_FIELDS = ("compute_util", "memory_util", "memory_used_mb", "memory_total_mb", "temperature_c", "power_w")


class GpuMeasurements(models.Model):
    compute_util = models.FloatField()
    memory_util = models.FloatField()
    memory_used_mb = models.IntegerField()
    memory_total_mb = models.IntegerField()
    temperature_c = models.FloatField()
    power_w = models.FloatField()

    class Meta:
        abstract = True


class GpuLatest(GpuMeasurements):
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()
    uuid = models.CharField(max_length=100)
    time = models.DateTimeField()
    source = models.CharField(max_length=16, default="nvml")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "index"], name="one_latest_sample_per_gpu")]

    def __str__(self):
        return f"{self.node}/{self.index}"


class GpuSampleRaw(GpuMeasurements):
    time = models.DateTimeField(db_index=True)
    node = models.CharField(max_length=100)
    index = models.PositiveSmallIntegerField()

    class Meta:
        indexes = [models.Index(fields=["node", "index", "time"])]

    def __str__(self):
        return f"{self.node}/{self.index} at {self.time}"


class _Rollup(models.Model):
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

    class Meta:
        abstract = True

    def __str__(self):
        return f"{self.node}/{self.index} {self.bucket}"


class GpuMinute(_Rollup):
    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "index", "bucket"], name="one_minute_per_gpu")]
        indexes = [models.Index(fields=["bucket"])]


class GpuHour(_Rollup):
    class Meta:
        constraints = [models.UniqueConstraint(fields=["node", "index", "bucket"], name="one_hour_per_gpu")]
        indexes = [models.Index(fields=["bucket"])]


class NodeToken(models.Model):
    """The credential of one node's agent: it may send samples for that node only."""

    PREFIX = "gpn_"

    node = models.CharField(max_length=100, unique=True)
    key_hash = models.CharField(max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField(null=True, blank=True)

    def __str__(self):
        return self.node

    @staticmethod
    def hash_key(key: str) -> str:
        return hashlib.sha256(key.encode()).hexdigest()

    @classmethod
    def issue(cls, node: str) -> str:
        key = cls.PREFIX + secrets.token_urlsafe(32)
        cls.objects.update_or_create(node=node, defaults={"key_hash": cls.hash_key(key)})
        return key
