"""The slurmrestd client against the real Slurm 24.11 dev cluster."""

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from cluster.errors import SlurmAuthError, SlurmPermissionDenied, SlurmRequestError
from cluster.slurmrest.client import SlurmRestClient
from cluster.slurmrest.tokens import TokenMinter
from testing.slurm import read_output, submission, wait_for, wait_for_state

# Each test that needs the dev cluster says so (`slurm`); the others run without it.
FINISHED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.mark.slurm
def test_gpu_job_runs_as_its_user_with_a_gpu_and_is_accounted(slurm, cluster_users):
    user = cluster_users[0]
    client = slurm.as_user(user)
    job_id = client.submit_job(
        submission(
            'echo "CVD=$CUDA_VISIBLE_DEVICES"; echo "WHO=$(id -un)"; sleep 2',
            tres_per_node="gres/gpu:a100:1",
        )
    )
    job = wait_for_state(client, job_id, FINISHED)
    assert job.state == "COMPLETED", job
    assert job.user_name == user
    assert job.nodes.startswith("gpu-a100-")
    output = read_output(job)
    assert f"WHO={user}" in output
    visible = next(line for line in output.splitlines() if line.startswith("CVD="))[4:]
    assert visible.isdigit(), output

    record = wait_for(
        lambda: (r := slurm.get_accounting(job_id)) and r.state == "COMPLETED" and r.elapsed_seconds > 0 and r,
        what="accounting record",
    )
    assert record.user_name == user
    assert record.gpu_count == 1
    assert record.elapsed_seconds >= 2
    assert record.gpu_seconds == record.elapsed_seconds


@pytest.mark.slurm
def test_node_list_shows_three_gpu_types_with_their_counts(slurm):
    nodes = {node.name: node for node in slurm.list_nodes()}
    totals: dict[str, int] = {}
    for node in nodes.values():
        for group in node.gpus:
            totals[group.gpu_type] = totals.get(group.gpu_type, 0) + group.count
    assert totals == {"rtx4090": 8, "a100": 8, "h100": 2}
    assert nodes["gpu-h100-01"].gpus[0].count == 2
    assert "gpu_type:a100" in nodes["gpu-a100-02"].features
    assert all(node.shards_total > 0 for node in nodes.values())


@pytest.mark.slurm
def test_constraint_routes_to_an_rtx4090_node(slurm, cluster_users):
    client = slurm.as_user(cluster_users[0])
    job_id = client.submit_job(
        submission("hostname", tres_per_node="gres/gpu:rtx4090:1", constraints="gpu_type:rtx4090")
    )
    job = wait_for_state(client, job_id, FINISHED)
    assert job.state == "COMPLETED"
    assert job.nodes.startswith("gpu-4090-"), job.nodes


@pytest.mark.slurm
def test_shard_request_runs_with_its_shard_count(slurm, cluster_users):
    client = slurm.as_user(cluster_users[0])
    job_id = client.submit_job(submission('echo "SHARDS=$SLURM_SHARDS_ON_NODE"', tres_per_node="gres/shard:a100:3"))
    job = wait_for_state(client, job_id, FINISHED)
    assert job.state == "COMPLETED"
    assert "SHARDS=3" in read_output(job)


@pytest.mark.slurm
def test_more_gpus_than_any_node_has_is_a_clear_permanent_error(slurm, cluster_users):
    client = slurm.as_user(cluster_users[0])

    def jobs_of_user():
        return {job.job_id: job for job in slurm.list_jobs() if job.user_name == cluster_users[0]}

    before = jobs_of_user()
    with pytest.raises(SlurmRequestError) as caught:
        # QOS `normal` has no GPU limits: a plan's QOS would refuse 9 GPUs first (2050).
        client.submit_job(submission("true", tres_per_node="gres/gpu:a100:9", qos="normal"))
    assert not caught.value.transient
    assert caught.value.error_number == 2014
    assert "configuration is not available" in caught.value.message.lower()
    # Slurm 24.11 keeps a record of the refused submission, FAILED with BadConstraints;
    # what matters is that nothing of it ever waits for or holds GPUs.
    new = [job for job_id, job in jobs_of_user().items() if job_id not in before]
    assert all(job.state == "FAILED" and job.state_reason == "BadConstraints" for job in new), new


@pytest.mark.slurm
def test_a_gpu_request_without_a_type_is_refused(slurm, cluster_users):
    """Typed GPU limits bind only typed requests, so the cluster's job_submit.lua refuses
    untyped ones (deploy/devcluster/README.md); over REST that is error 2072."""
    client = slurm.as_user(cluster_users[0])
    for untyped in ("gres/gpu:1", "gres/shard:2"):
        with pytest.raises(SlurmRequestError) as caught:
            client.submit_job(submission("true", tres_per_node=untyped))
        assert caught.value.error_number == 2072, untyped


@pytest.mark.slurm
def test_a_bad_token_raises_an_authentication_error(slurm, tmp_path):
    wrong_key = tmp_path / "wrong.key"
    wrong_key.write_bytes(b"not-the-cluster-key-0123456789ab")
    client = SlurmRestClient(slurm.base_url, slurm.adapter, TokenMinter(wrong_key), user_name="slurm")
    with pytest.raises(SlurmAuthError):
        client.list_nodes()
    with pytest.raises(SlurmAuthError):
        client.list_job_states()


@pytest.mark.slurm
def test_a_refused_cancel_is_reported_as_refused(slurm, cluster_users):
    owner, other = (slurm.as_user(name) for name in cluster_users)
    job_id = owner.submit_job(submission("sleep 120"))
    wait_for_state(owner, job_id, {"PENDING", "RUNNING"})
    with pytest.raises(SlurmPermissionDenied):
        other.cancel_job(job_id)
    assert owner.get_job(job_id).state in {"PENDING", "RUNNING"}
    owner.cancel_job(job_id)
    assert wait_for_state(owner, job_id, {"CANCELLED"}).state == "CANCELLED"


@pytest.mark.slurm
def test_cluster_check_lists_nodes_and_rejects_a_bad_token(slurm, settings, tmp_path, capsys):
    call_command("cluster_check")
    out = capsys.readouterr().out
    assert "gpu-h100-01" in out
    assert "a100: " in out and "h100: " in out and "rtx4090: " in out

    wrong_key = tmp_path / "wrong.key"
    wrong_key.write_bytes(b"x" * 32)
    settings.SLURM_JWT_KEY_FILE = wrong_key
    from cluster.clusters import services

    services._minter.cache_clear()
    try:
        with pytest.raises(CommandError, match="rejected the token"):
            call_command("cluster_check")
    finally:
        services._minter.cache_clear()


def test_cluster_check_fails_when_slurmrestd_is_unreachable(settings):
    settings.SLURMRESTD_URL = "http://127.0.0.1:9"  # the discard port: nothing listens
    with pytest.raises(CommandError, match="cannot be used"):
        call_command("cluster_check")
