"""What a job asks for, read from Slurm's tres_per_node: quotas count mirrored jobs too."""

import pytest

from cluster.records.gres import requested_gpus


@pytest.mark.parametrize(
    "tres, expected",
    [
        ("gres/gpu:a100:2", ("a100", 2)),
        ("gres/gpu:rtx4090:1,gres/nvme:500", ("rtx4090", 1)),
        ("gres/shard:a100:3", ("a100", 1)),  # part of one GPU counts as one
        ("gres/gpu:2", ("", 0)),  # untyped: the cluster refuses these (job_submit.lua)
        ("", ("", 0)),
        (None, ("", 0)),
        ("cpu=4", ("", 0)),
    ],
)
def test_requested_gpus(tres, expected):
    assert requested_gpus(tres) == expected


@pytest.mark.parametrize(
    "tres, expected",
    [
        ("gres/gpu:a100:2", ("a100", 2, 0)),
        ("gres/shard:a100:3,gres/nvme:100", ("a100", 0, 3)),
        ("gres/gpu:rtx4090:1,gres/nvme:500", ("rtx4090", 1, 0)),
        ("", ("", 0, 0)),
    ],
)
def test_requested_quota(tres, expected):
    from cluster.records.gres import requested_quota

    assert requested_quota(tres) == expected
