from rest_framework import serializers


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The portal's name for it: what a job spec's `cluster` takes")
    primary = serializers.BooleanField(help_text="The portal's own cluster (the SLURM_* settings)")
    state = serializers.ChoiceField(
        choices=["up", "stale", "down", "unknown"],
        help_text="up: answering; stale: answered before, not now; down: never answered; unknown: not probed yet",
    )
    stale_since = serializers.DateTimeField(
        allow_null=True, help_text="While not answering: its last answer (what the portal shows is as of then)"
    )
    checked_at = serializers.DateTimeField(allow_null=True, help_text="The last probe")
    slurm_release = serializers.CharField(help_text="As its slurmrestd reports it; empty until it has answered")
    rest_version = serializers.CharField(help_text="The slurmrestd API version the portal speaks to it")
    gpu_types = serializers.ListField(child=serializers.CharField())
    time_zone = serializers.CharField()
    error = serializers.SerializerMethodField(help_text="Why the last probe failed (admins only; null for others)")

    def get_error(self, view) -> str | None:
        return view.error or None if self.context.get("is_admin") else None
