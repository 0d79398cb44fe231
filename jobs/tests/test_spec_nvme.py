"""The job spec's NVMe cache field (`nvme_gb`): parsed, bounded, stored, and sent to Slurm as
the count-only GRES `gres/nvme` next to the GPU request (cluster.records.gres.build_tres_per_node)."""

import pytest
from django.http import QueryDict

from cluster.records.gres import build_tres_per_node, requested_gpus, requested_nvme_gb, requested_shards
from jobs.forms import form_data_from_post
from jobs.submission.spec import SpecError, job_spec_from_dict, parse_job_spec
from jobs.tests.test_spec import PRO, policy, spec_data

POLICY = policy(max_nvme_gb=3500)


def test_nvme_goes_next_to_whole_gpus_and_round_trips():
    spec = parse_job_spec(spec_data(nvme_gb=500), plan=PRO, policy=POLICY)
    assert spec.gpu.nvme_gb == 500
    assert spec.gpu.tres_per_node() == "gres/gpu:a100:1,gres/nvme:500"
    assert job_spec_from_dict(spec.to_dict(), policy=POLICY) == spec


def test_nvme_goes_next_to_shards():
    data = spec_data(nvme_gb="100", gpu_memory_gb="12")
    del data["gpu_count"]
    spec = parse_job_spec(data, plan=PRO, policy=POLICY)
    tres = spec.gpu.tres_per_node()
    assert tres == "gres/shard:a100:3,gres/nvme:100"
    # What the mirror, quotas and the telemetry emulator read back from it.
    assert requested_shards(tres) == 3 and requested_nvme_gb(tres) == 100
    assert requested_gpus(tres) == ("a100", 1)


@pytest.mark.parametrize("absent", [None, "", 0, "0"])
def test_no_nvme_means_none_and_is_not_stored(absent):
    data = spec_data()
    if absent is not None:
        data["nvme_gb"] = absent
    spec = parse_job_spec(data, plan=PRO, policy=POLICY)
    assert spec.gpu.nvme_gb == 0
    assert spec.gpu.tres_per_node() == "gres/gpu:a100:1"
    assert "nvme_gb" not in spec.to_dict()


@pytest.mark.parametrize("bad", [3501, -1, "1.5", "5G", True, 2.0])
def test_nvme_out_of_range_or_not_whole_is_refused_by_field(bad):
    with pytest.raises(SpecError) as refused:
        parse_job_spec(spec_data(nvme_gb=bad), plan=PRO, policy=POLICY)
    assert list(refused.value.errors) == ["nvme_gb"]


def test_a_pool_without_nvme_refuses_any_cache():
    with pytest.raises(SpecError) as refused:
        parse_job_spec(spec_data(nvme_gb=1), plan=PRO, policy=policy(max_nvme_gb=0))
    assert "no NVMe cache" in refused.value.errors["nvme_gb"][0]


def test_the_form_passes_the_field_through():
    post = QueryDict(mutable=True)
    post.update({"nvme_gb": " 250 ", "name": "x"})
    assert form_data_from_post(post) == {"nvme_gb": "250", "name": "x"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"gpu_type": "A100; rm", "gpus": 1}, "not a GPU type"),
        ({"gpu_type": "a100"}, "needs a GPU count or shards"),
        ({"gpu_type": "a100", "gpus": 1, "shards": 2}, "not both"),
        ({"gpu_type": "a100", "gpus": 1, "nvme_gb": -5}, "0 or more"),
    ],
)
def test_the_builder_refuses_what_slurm_should_never_see(kwargs, message):
    gpu_type = kwargs.pop("gpu_type")
    with pytest.raises(ValueError, match=message):
        build_tres_per_node(gpu_type, **kwargs)
