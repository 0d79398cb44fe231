"""Host lists as Slurm writes them: the examples of Slurm's documentation, and the real
`scontrol show hostnames` as the judge on the dev cluster."""

import pytest

from cluster.clusters.services import slurm_cli
from cluster.records.hostlist import HostlistError, expand_hostlist

# (list, names): Slurm's documented forms (hostlist expressions in slurm.conf(5) and scontrol(1)).
EXAMPLES = [
    ("lx[10-20]", [f"lx{n}" for n in range(10, 21)]),
    ("tux[1-3,5]", ["tux1", "tux2", "tux3", "tux5"]),
    ("linux[01-03]", ["linux01", "linux02", "linux03"]),
    ("rack[1-2]-node[1-2]", ["rack1-node1", "rack1-node2", "rack2-node1", "rack2-node2"]),
    ("gpu-a100-[01-02,04],gpu-h100-01", ["gpu-a100-01", "gpu-a100-02", "gpu-a100-04", "gpu-h100-01"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("n[08-10]", ["n08", "n09", "n10"]),
    ("single", ["single"]),
    ("", []),
]


@pytest.mark.parametrize("text, names", EXAMPLES)
def test_documented_forms(text, names):
    assert expand_hostlist(text) == names


@pytest.mark.parametrize("text", ["n[1-", "n[1-2", "n]1[", "n[5-2]"])
def test_a_list_slurm_would_not_write_is_an_error_not_no_nodes(text):
    with pytest.raises(HostlistError, match="not a Slurm host list"):
        expand_hostlist(text)


@pytest.mark.slurm
@pytest.mark.parametrize("text", [text for text, _names in EXAMPLES if text])
def test_the_same_names_as_scontrol(text):
    shown = slurm_cli().run("scontrol", "show", "hostnames", text)
    assert expand_hostlist(text) == shown.stdout.split()
