"""The dev cluster's jobs run in the nodes' network namespace (deploy/devcluster/lib/network.sh):
a job reaches slurmctld on the host's side of the link, and nothing listening on the host's
loopback (Redis without a password, PostgreSQL, the portal, Prometheus)."""

import pytest
from django.conf import settings

from cluster.clusters.services import rest_client
from testing.slurm import read_output, submission, wait_for_state

pytestmark = [pytest.mark.slurm, pytest.mark.django_db(transaction=True)]

PROBE = """
probe() {  # probe <name> <address> <port>: "name open" or "name closed"
    if timeout 3 bash -c "exec 3<>/dev/tcp/$2/$3" 2>/dev/null; then echo "$1 open"; else echo "$1 closed"; fi
}
echo "address $(hostname -I | tr -d ' ')"
probe redis 127.0.0.1 6379
probe postgresql 127.0.0.1 5432
probe slurmrestd 127.0.0.1 @REST_PORT@
probe slurmctld @HOST_ADDRESS@ @CTLD_PORT@
"""


def test_a_job_reaches_slurmctld_and_nothing_on_the_hosts_loopback(alice, provision):
    client = rest_client(provision(alice).cluster_username)
    node_address = {node.address for node in client.list_nodes()}
    assert len(node_address) == 1 and node_address != {"127.0.0.1"}, node_address
    (address,) = node_address
    host_address = address.rsplit(".", 1)[0] + ".1"  # the host's end of the link (lib/network.sh)
    rest_port = int(settings.SLURMRESTD_URL.rstrip("/").rsplit(":", 1)[1])  # base + 820; slurmctld: + 817
    script = (
        PROBE.replace("@REST_PORT@", str(rest_port))
        .replace("@HOST_ADDRESS@", host_address)
        .replace("@CTLD_PORT@", str(rest_port - 3))
    )
    job_id = client.submit_job(
        submission(script, name="network-probe", time_limit_minutes=2, tres_per_node="gres/gpu:rtx4090:1")
    )
    job = wait_for_state(client, job_id, {"COMPLETED", "FAILED"})
    assert job.state == "COMPLETED"
    seen = dict(line.split(" ", 1) for line in read_output(job).split("\n") if " " in line)
    assert seen["address"] == address
    # Open on the host's loopback (this test's own Redis and PostgreSQL; slurmrestd), not to a job.
    assert seen["redis"] == "closed" and seen["postgresql"] == "closed" and seen["slurmrestd"] == "closed"
    assert seen["slurmctld"] == "open"
