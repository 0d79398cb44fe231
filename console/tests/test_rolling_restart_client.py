"""A client generated from the served schema (openapi-python-client) starts, reads and stops a rolling
restart as an admin; a user's client is refused each of them and sees none. No Slurm: the restart is
stopped before its first pass (sent on commit to a worker that is not running here)."""

import importlib

import pytest

from accounts.models import ApiToken
from cluster.models import Node
from console.models import RollingRestart
from jobs.tests.test_api_client import PACKAGE, client_package, generate_client  # noqa: F401
from testing.servers import portal_stack

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_generated_client_starts_reads_and_stops_a_rolling_restart(admin_user, alice, client_package):  # noqa: F811
    for name in ("gpu-a100-01", "gpu-a100-02"):
        Node.objects.create(name=name, state="IDLE")
    _token, admin_key = ApiToken.issue(admin_user, "generated client")
    _token, alice_key = ApiToken.issue(alice, "generated client")
    with portal_stack() as base_url:
        generate_client(f"{base_url}/api/schema/?format=json", client_package)
        client_module = importlib.import_module(PACKAGE)
        models = importlib.import_module(f"{PACKAGE}.models")

        def call(name):
            return importlib.import_module(f"{PACKAGE}.api.maintenance.{name}")

        as_admin = client_module.AuthenticatedClient(base_url=base_url, token=admin_key)
        as_alice = client_module.AuthenticatedClient(base_url=base_url, token=alice_key)
        body = models.RestartInput(nodes=["gpu-a100-02", "gpu-a100-01"], reason="slurmd upgrade")
        assert call("rolling_restarts_create").sync_detailed(client=as_alice, body=body).status_code == 403
        assert not RollingRestart.objects.exists()

        started = call("rolling_restarts_create").sync(client=as_admin, body=body)
        assert [step.node for step in started.steps] == ["gpu-a100-02", "gpu-a100-01"]  # the order given
        assert started.state == models.RollingRestartStateEnum.RUNNING
        assert call("rolling_restarts_read").sync_detailed(client=as_alice, id=started.id).status_code == 403
        assert call("rolling_restarts_list").sync_detailed(client=as_alice).status_code == 403
        assert call("rolling_restarts_stop").sync_detailed(client=as_alice, id=started.id).status_code == 403
        again = call("rolling_restarts_create").sync_detailed(client=as_admin, body=body)
        assert again.status_code == 409  # one at a time

        stopped = call("rolling_restarts_stop").sync(client=as_admin, id=started.id)
        assert stopped.state == models.RollingRestartStateEnum.STOPPED
        assert {step.state_words for step in stopped.steps} == {"skipped (stopped before its turn)"}
        assert [r.id for r in call("rolling_restarts_list").sync(client=as_admin)] == [started.id]
        unknown = call("rolling_restarts_create").sync_detailed(
            client=as_admin, body=models.RestartInput(nodes=["gpu-nope"], reason="x")
        )
        assert unknown.status_code == 400 and b"no node named gpu-nope" in unknown.content
