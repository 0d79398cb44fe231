"""Slurm's resource strings in words on the pages (foundation/templatetags/resources.py)."""

import pytest

from foundation.templatetags.resources import resources


@pytest.mark.parametrize(
    "slurm, words",
    [
        ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1", "1 A100 GPU, 1 CPU, 1,000 MB memory"),
        (
            "cpu=8,mem=64G,node=1,gres/gpu=2,gres/gpu:h100=2,gres/nvme=200",
            "2 H100 GPUs, 8 CPUs, 64 GB memory, 200 GB NVMe",
        ),
        ("gres/gpu:rtx4090:1", "1 RTX 4090 GPU"),
        ("gres/shard:a100:3", "3 A100 GPU shares"),
        ("gres/gpu=1", "1 GPU"),
        ("cpu=2,mem=1536M", "2 CPUs, 1.5 GB memory"),
        ("", ""),
        ("something else", "something else"),
    ],
)
def test_slurm_resources_read_as_words(slurm, words, settings):
    settings.GPU_TYPES = {
        "a100": {"label": "A100"},
        "h100": {"label": "H100"},
        "rtx4090": {"label": "RTX 4090"},
    }
    assert resources(slurm) == words


def test_a_gpu_type_reads_as_its_label(settings):
    from foundation.templatetags.resources import _label

    settings.GPU_TYPES = {"a100": {"label": "NVIDIA A100 40GB"}}
    assert _label("a100") == "NVIDIA A100 40GB" and _label("x9") == "X9"
