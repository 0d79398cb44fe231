import pytest

from cluster.provisioning import LocalProvisioner
from cluster.services import slurm_cli
from testing.slurm import unique_cluster_name


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
