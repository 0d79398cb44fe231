"""The dataset versions a job asks for, checked against the user who asks.

A version may be mounted by whoever may read its dataset as a member (its owner, or an active
member of its group: datasets.queries.own_datasets); anyone else gets the same answer as for a
version that does not exist. Only ready versions are mounted. Each is mounted at /data/<its
dataset's name>, so two versions of one dataset, or two datasets of one name (a user's and a
group's), cannot go together. The versions' bytes are held on the job's node as NVMe: their
GB, rounded up, are added to the job's gres/nvme (JobSpec.gpu.dataset_gb), which must still
fit the largest node's cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from datasets.models import DatasetVersion, VersionState
from datasets.queries import own_datasets
from foundation.words import counted
from jobs.models import FINAL_STATES, JobDataset
from jobs.submission.spec import JobSpec, SpecError, SpecPolicy

BYTES_PER_GB = 10**9  # Slurm's gres/nvme counts plain GB, as the plans' included_nvme_gb does


@dataclass(frozen=True)
class Mount:
    version: DatasetVersion
    name: str

    @property
    def size_bytes(self) -> int:
        return self.version.size_bytes


def resolve_mounts(user, spec: JobSpec) -> list[Mount]:
    """The spec's versions as mounts, in the order asked; SpecError on `datasets` otherwise."""
    return mounts_of(user, spec.datasets)


def mounts_of(user, version_ids) -> list[Mount]:
    """Dataset versions as mounts, in the order asked: the user's to mount, ready, one a name;
    SpecError on `datasets` otherwise (a submission and a quote alike)."""
    if not version_ids:
        return []
    found = {
        version.pk: version
        for version in DatasetVersion.objects.select_related("dataset").filter(
            pk__in=version_ids, dataset__in=own_datasets(user)
        )
    }
    problems: list[str] = []
    mounts: list[Mount] = []
    names: dict[str, int] = {}
    for version_id in version_ids:
        version = found.get(version_id)
        if version is None:
            problems.append(f"No dataset version {version_id} that you may use.")
            continue
        if version.state != VersionState.READY:
            problems.append(f"{version} is {version.state}; only a ready version can be mounted.")
            continue
        name = version.dataset.name
        if name in names:
            problems.append(f"Two versions would be mounted at /data/{name}; choose one.")
            continue
        names[name] = version_id
        mounts.append(Mount(version=version, name=name))
    if problems:
        raise SpecError({"datasets": problems})
    return mounts


def dataset_gb(mounts: list[Mount]) -> int:
    return math.ceil(sum(mount.size_bytes for mount in mounts) / BYTES_PER_GB)


def with_dataset_nvme(spec: JobSpec, mounts: list[Mount], policy: SpecPolicy) -> JobSpec:
    """The spec whose NVMe request holds the datasets too; SpecError when that outgrows a node."""
    gb = dataset_gb(mounts)
    if not gb:
        return spec
    if spec.gpu.nvme_gb + gb > policy.max_nvme_gb:
        raise SpecError(
            {
                "datasets": [
                    f"These datasets take {gb} GB of a node's NVMe, and the job asks for {spec.gpu.nvme_gb} GB more; "
                    f"the largest node has {policy.max_nvme_gb} GB."
                ]
            }
        )
    return replace(spec, gpu=replace(spec.gpu, dataset_gb=gb))


def lock_mounted_versions(mounts: list[Mount]) -> None:
    """Inside the submission's transaction, before its JobDataset rows are written: the versions'
    rows locked (FOR NO KEY UPDATE, which a deletion's FOR UPDATE waits for) and still ready, so
    a version deleted since resolve_mounts read it refuses the job instead of mounting nothing."""
    if not mounts:
        return
    ready = set(
        DatasetVersion.objects.select_for_update(no_key=True)
        .filter(pk__in=[mount.version.pk for mount in mounts], state=VersionState.READY)
        .values_list("pk", flat=True)
    )
    gone = [f"{mount.version} was deleted meanwhile." for mount in mounts if mount.version.pk not in ready]
    if gone:
        raise SpecError({"datasets": gone})


def unfinished_jobs_mounting(version: DatasetVersion) -> str:
    """datasets.actions' deletion check: a version queued or running jobs mount stays."""
    count = JobDataset.objects.filter(version=version).exclude(job__state__in=FINAL_STATES).count()
    if not count:
        return ""
    return f"Version {version.number} is mounted by {counted(count, 'queued or running job')}; delete it once they end."
