from pathlib import Path

import pytest

from cluster.clusters.registry import parse_clusters
from cluster.clusters.services import slurm_cli
from cluster.commands.provisioning import LocalProvisioner
from cluster.management.commands.write_dev_clusters import dev_cluster_entries
from testing.slurm import a100s_held, unique_cluster_name


@pytest.fixture(scope="session")
def cluster_users(slurm):
    """Two throwaway Slurm users with associations, removed at the end of the session."""
    from django.conf import settings

    cli = slurm_cli()
    backend = LocalProvisioner(cli, settings.SLURM_ACCOUNT)
    names = [unique_cluster_name("pta"), unique_cluster_name("ptb")]
    for name in names:
        backend.ensure_user(name, ["normal", "pro"], "pro")
    yield names
    for name in names:
        cli.run("scancel", "-u", name, check=False)
        backend.remove_user(name)


@pytest.fixture
def other_generation(settings, slurm):
    """The dev cluster of the other Slurm generation (`make test` builds both), as a further cluster."""
    import json

    entries = dev_cluster_entries(settings.DEVCLUSTER_RELEASES)
    if not entries:
        pytest.fail("the other dev cluster generation is not built: `make cluster-up` builds every release")
    (config,) = parse_clusters(json.dumps(entries[:1]), primary_name=settings.SLURM_CLUSTER_NAME)
    return config


@pytest.fixture
def own_a100s_held(settings, slurm):
    with a100s_held(Path(settings.DEVCLUSTER_DIR) / "root", slurm_cli(), 30):
        yield
