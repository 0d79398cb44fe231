from pathlib import Path, PurePosixPath

import pytest

from cluster.files.paths import JobPathMap

MAP = JobPathMap(PurePosixPath("/srv/gpupool/jobs"), Path("/var/lib/gpupool/devcluster/root/srv/gpupool/jobs"))


def test_maps_slurm_paths_to_local_ones():
    local = MAP.to_local("/srv/gpupool/jobs/abc/stdout.log")
    assert local == Path("/var/lib/gpupool/devcluster/root/srv/gpupool/jobs/abc/stdout.log")


@pytest.mark.parametrize("path", ["/etc/passwd", "/srv/gpupool/jobs/../../../etc/shadow", "/srv/gpupool/jobsX/a"])
def test_refuses_paths_outside_the_job_root(path):
    with pytest.raises(ValueError):
        MAP.to_local(path)


@pytest.mark.parametrize("key", ["", "..", "a/b", "."])
def test_job_keys_cannot_escape(key):
    with pytest.raises(ValueError):
        MAP.job_dir(key)
