"""`GET /api/v1/clusters/`: every Slurm cluster the portal talks to (cluster/clusters/registry.py) and
whether it answers (cluster/clusters/probing.py); what a user picks a job's cluster from."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import is_admin
from cluster.clusters.registry import NAME, all_clusters
from cluster.records.queries import cluster_views
from jobs.api.schema import errors


class ClusterSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The portal's name for it (docs/clusters.md)")
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


class ClusterListView(APIView):
    """Every cluster the portal talks to, and whether it answers: what a user picks a job's
    cluster from, and what tells them a cluster's pages are out of date."""

    @extend_schema(
        operation_id="clusters_list",
        summary="The Slurm clusters, their release, REST version and state",
        responses={200: ClusterSerializer(many=True), **errors(401)},
        tags=["clusters"],
    )
    def get(self, request):
        serializer = ClusterSerializer(cluster_views(), many=True, context={"is_admin": is_admin(request.user)})
        return Response(serializer.data)


CLUSTER_FILTER = OpenApiParameter(
    "cluster",
    str,
    required=False,
    pattern=f"^{NAME.pattern}$",
    description=(
        "Only the jobs of this cluster: a name from /api/v1/clusters/ or one the caller's jobs ran on (another: 400)"
    ),
)


def cluster_filter(params, jobs) -> str | None:
    """The `cluster` query parameter, or None when absent. A name that no cluster has is a
    ValidationError (a typo lists nothing otherwise), unless some of `jobs` ran there: a cluster
    removed from the configuration still filters its old jobs."""
    name = params.get("cluster")
    if name is None:
        return None
    if not NAME.fullmatch(name):
        raise ValidationError({"cluster": ["A cluster's name is 1-32 of a-z, 0-9, '.' and '-'."]})
    names = [cluster.name for cluster in all_clusters()]
    if name not in names and not jobs.filter(cluster=name).exists():
        raise ValidationError({"cluster": [f"No cluster is named {name!r}; the clusters are {', '.join(names)}."]})
    return name
