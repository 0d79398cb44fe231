"""CLUSTERS_FILE: each further cluster checked field by field, with a sentence naming it."""

import json

import pytest

from cluster.clusters.registry import ClusterConfigError, parse_clusters

GOOD = {
    "name": "site-b",
    "slurmrestd_url": "https://slurm-b.example.org:6820/",
    "jwt_key_file": "/etc/gpupool/site-b.key",
    "cli_prefix": "ssh -o BatchMode=yes 'slurm b'",
    "gpu_types": ["h100"],
    "time_zone": "Europe/Berlin",
}


def _parse(entries, primary="gpupool"):
    return parse_clusters(json.dumps(entries), primary_name=primary, known_gpu_types={"a100": {}, "h100": {}})


def test_a_good_entry_is_read_with_its_defaults():
    (cluster,) = _parse([GOOD])
    assert cluster.name == "site-b" and not cluster.primary
    assert cluster.slurmrestd_url == "https://slurm-b.example.org:6820"
    assert cluster.cli_prefix == ("ssh", "-o", "BatchMode=yes", "slurm b")  # split, never a shell
    assert cluster.api_version == "auto" and cluster.gpu_types == ("h100",) and cluster.time_zone == "Europe/Berlin"
    assert not cluster.takes_jobs  # no job roots: probed and listed, never sent a job
    (taking,) = _parse([{**GOOD, "job_root": "/srv/gpupool/jobs", "job_root_local": "/mnt/site-b/jobs"}])
    assert taking.takes_jobs and str(taking.job_root_local) == "/mnt/site-b/jobs"


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"name": "Site B"}, "name must be"),
        ({"name": "-b"}, "name must be"),
        ({"slurmrestd_url": "ftp://x"}, "slurmrestd_url must be"),
        ({"slurmrestd_url": "http://x:6820/slurm/v0.0.42"}, "slurmrestd_url must be"),
        ({"jwt_key_file": "key"}, "jwt_key_file must be an absolute path"),
        ({"cli_prefix": ["ssh"]}, "cli_prefix must be a string"),
        ({"api_version": "latest"}, "api_version must be"),
        ({"job_root": "/srv/gpupool/jobs"}, "job_root and job_root_local go together"),
        ({"job_root": "/srv/jobs", "job_root_local": "mnt/jobs"}, "job_root and job_root_local go together"),
        ({"gpu_types": ["b200"]}, "GPU type(s) b200 are not in GPU_TYPES_FILE"),
        ({"gpu_types": "h100"}, "gpu_types must be a list"),
        ({"time_zone": "Mars/Olympus"}, "time_zone 'Mars/Olympus' is not a known time zone"),
        ({"password": "x"}, "unknown field(s) password"),
    ],
)
def test_a_bad_field_is_refused_naming_the_cluster_and_the_field(change, words):
    with pytest.raises(ClusterConfigError) as refused:
        _parse([{**GOOD, **change}])
    assert words in str(refused.value)


def test_names_are_unique_the_portals_own_included():
    with pytest.raises(ClusterConfigError, match="site-b used twice"):
        _parse([GOOD, {**GOOD, "slurmrestd_url": "http://other:6820"}])
    with pytest.raises(ClusterConfigError, match="gpupool used twice"):
        _parse([{**GOOD, "name": "gpupool"}])


@pytest.mark.parametrize(("text", "words"), [("{", "not JSON"), ('{"name": "x"}', "must be a JSON list")])
def test_a_file_that_is_not_a_list_is_refused(text, words):
    with pytest.raises(ClusterConfigError, match=words):
        parse_clusters(text, primary_name="gpupool")
