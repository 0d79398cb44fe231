from django.utils import timezone
from rest_framework import serializers

from jobs.models import Job
from jobs.reasons import explain_reason


class JobSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(read_only=True)
    reason = serializers.SerializerMethodField()
    expected_start = serializers.SerializerMethodField()
    expected_end = serializers.SerializerMethodField()
    elapsed_seconds_so_far = serializers.SerializerMethodField()

    class Meta:
        model = Job
        fields = [
            "id",
            "uuid",
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
            "error",
            "spec",
            "created_at",
            "updated_at",
        ]
        read_only_fields = fields

    def get_reason(self, job) -> str:
        return explain_reason(job.state_reason)

    def get_expected_start(self, job):
        # For a pending job Slurm's start_time is the backfill scheduler's estimate.
        return job.start_time if job.state == "PENDING" else None

    def get_expected_end(self, job):
        return job.end_time if job.state in {"RUNNING", "PENDING", "SUSPENDED"} else None

    def get_elapsed_seconds_so_far(self, job) -> int | None:
        if job.state == "RUNNING" and job.start_time:
            return max(0, int((timezone.now() - job.start_time).total_seconds()))
        if job.start_time and job.end_time and job.state not in {"PENDING", "SUBMITTING"}:
            return max(0, int((job.end_time - job.start_time).total_seconds()))
        return None


class JobSpecInputSerializer(serializers.Serializer):
    """For the schema only: the body of a submission. Validation is jobs.spec.parse_job_spec."""

    name = serializers.CharField(required=False, help_text="1-64 letters, digits, . _ -")
    image = serializers.CharField(help_text="A pinned image: repo:tag (never latest) or repo@sha256:digest")
    gpu_type = serializers.CharField(help_text="rtx4090, a100 or h100 (as the plan allows)")
    gpu_count = serializers.IntegerField(required=False, help_text="Whole GPUs; or give gpu_memory_gb")
    gpu_memory_gb = serializers.IntegerField(required=False, help_text="GPU memory, mapped to shards of one GPU")
    command = serializers.CharField(help_text="Runs inside the job, never on the portal")
    time_limit_minutes = serializers.IntegerField()
    data_mount = serializers.CharField(required=False, help_text="Mounted at /data in the job")
    environment = serializers.DictField(child=serializers.CharField(), required=False)


class LogsSerializer(serializers.Serializer):
    stdout = serializers.CharField()
    stderr = serializers.CharField()
    stdout_size = serializers.IntegerField()
    stderr_size = serializers.IntegerField()
    truncated = serializers.BooleanField()
    diagnosis = serializers.ListField(child=serializers.DictField())
