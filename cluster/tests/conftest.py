import pytest

from cluster.errors import SlurmError
from cluster.provisioning import LocalProvisioner
from cluster.services import rest_client, slurm_cli
from testing.slurm import unique_cluster_name


@pytest.fixture(scope="session")
def slurm():
    """The service client of the real dev cluster; fails (never skips) when it is down."""
    client = rest_client()
    try:
        client.check_access()
    except SlurmError as exc:
        pytest.fail(f"the dev cluster is not usable ({exc}); start it with `make cluster-up`")
    return client


@pytest.fixture(scope="session")
def cluster_users(slurm):
    """Two throwaway Slurm users with associations, removed at the end of the session."""
    from django.conf import settings

    cli = slurm_cli()
    backend = LocalProvisioner(cli, settings.SLURM_ACCOUNT)
    names = [unique_cluster_name("pta"), unique_cluster_name("ptb")]
    for name in names:
        backend.ensure_user(name, ["pro"], "pro")
    yield names
    for name in names:
        cli.run("scancel", "-u", name, check=False)
        backend.remove_user(name)
