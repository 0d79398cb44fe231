from django.apps import AppConfig


class ClusterConfig(AppConfig):
    name = "cluster"
    verbose_name = "Slurm cluster"

    def ready(self):
        from cluster.clusters import checks  # noqa: F401  (registers the system checks)
