"""The dev stack's further clusters as a CLUSTERS_FILE (cluster/clusters/registry.py): each dev cluster
generation other than SLURM_RELEASE whose root is built, so `make dev` serves both in one portal."""

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from cluster.clusters.registry import parse_clusters


def dev_cluster_entries(releases) -> list[dict]:
    entries = []
    for release in releases:
        if release == settings.SLURM_RELEASE or release not in settings.DEVCLUSTER_RELEASES:
            continue
        directory, url = settings.DEVCLUSTER_RELEASES[release]
        root = Path(directory) / "root"
        if not (root / "etc/slurm/slurm.conf").is_file():
            continue  # not built here: `make cluster-up SLURM_RELEASE=<release>` builds it
        entries.append(
            {
                "name": f"slurm-{release}",
                "slurmrestd_url": url,
                "jwt_key_file": str(root / "etc/slurm/jwt_hs256.key"),
                "cli_prefix": f"chroot {root}",
                "gpu_types": sorted(settings.GPU_TYPES),
                "job_root": settings.SLURM_JOB_ROOT,
                "job_root_local": str(root / settings.SLURM_JOB_ROOT.lstrip("/")),
            }
        )
    return entries


class Command(BaseCommand):
    help = "Write the dev clusters other than SLURM_RELEASE's as a CLUSTERS_FILE."

    def add_arguments(self, parser):
        parser.add_argument("path")
        parser.add_argument("--releases", default=",".join(settings.DEVCLUSTER_RELEASES))

    def handle(self, path, releases, **options):
        entries = dev_cluster_entries([release.strip() for release in releases.split(",") if release.strip()])
        text = json.dumps(entries, indent=2) + "\n"
        parse_clusters(text, primary_name=settings.SLURM_CLUSTER_NAME, known_gpu_types=settings.GPU_TYPES)
        Path(path).write_text(text)
        names = ", ".join(entry["name"] for entry in entries) or "none"
        self.stdout.write(f"wrote {path}: further clusters {names}")
