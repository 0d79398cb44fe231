"""`manage.py check` (and every management command) looks at each configured cluster: its JWT
key must be readable, or every call to that cluster would fail with an auth error later. A
warning, not an error: the dev cluster's key exists only once the cluster has been built."""

import os

from django.core.checks import Warning, register

from cluster.clusters.registry import all_clusters


@register()
def cluster_key_files(app_configs, **kwargs):
    problems = []
    for cluster in all_clusters():
        if not os.access(cluster.jwt_key_file, os.R_OK):
            problems.append(
                Warning(
                    f"cluster {cluster.name}: its JWT key {cluster.jwt_key_file} cannot be read",
                    hint="Every slurmrestd call to it will fail: check the path and the portal user's access.",
                    id="cluster.W001",
                )
            )
    return problems
