from drf_spectacular.utils import extend_schema
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.access import is_admin
from cluster.api.serializers import ClusterSerializer
from cluster.queries import cluster_views
from jobs.api.schema import errors


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
