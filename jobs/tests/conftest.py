import pytest
from django.conf import settings
from rest_framework.test import APIClient

from accounts import actions
from accounts.models import ApiToken
from cluster.provisioning import provisioning_backend
from cluster.services import slurm_cli
from testing.slurm import unique_cluster_name


@pytest.fixture
def provision():
    """provision(user) -> profile: a real cluster account, locked again after the test."""
    names = []

    def _provision(user):
        profile = actions.provision(user.profile.pk, preferred_name=unique_cluster_name("ptj"))
        names.append(profile.cluster_username)
        return profile

    yield _provision
    cli = slurm_cli()
    for name in names:
        cli.run("scancel", "-u", name, check=False)
        provisioning_backend(settings.PROVISIONING_BACKEND, cli, settings.SLURM_ACCOUNT).remove_user(name)


@pytest.fixture
def api_client_for():
    def _client(user) -> APIClient:
        _token, key = ApiToken.issue(user, "test")
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
        return client

    return _client


GOOD_SPEC = {
    "name": "mnist",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "a100",
    "gpu_count": 1,
    "command": "echo hello from the job",
    "time_limit_minutes": 5,
}
