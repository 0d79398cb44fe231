from django.core.management.base import BaseCommand, CommandError

from cluster.clusters.registry import all_clusters
from telemetry.models import NodeToken, cluster_key


class Command(BaseCommand):
    help = "Create (or replace) the telemetry agent token of a node and print it once."

    def add_arguments(self, parser):
        parser.add_argument("node")
        parser.add_argument(
            "--cluster",
            help="the cluster the node is in (a CLUSTERS_FILE name; default: the portal's own): "
            "its agent's samples are that cluster's node's",
        )

    def handle(self, *args, node, cluster=None, **options):
        if cluster is not None and cluster not in {config.name for config in all_clusters()}:
            raise CommandError(f"no cluster is named {cluster!r} (SLURM_CLUSTER_NAME and CLUSTERS_FILE name them)")
        self.stdout.write(NodeToken.issue(node, cluster_key(cluster)))
