"""The Slurm clusters this portal talks to, as data.

The portal's own cluster is described by the SLURM_* settings (gpupool/settings.py) and is
named SLURM_CLUSTER_NAME; further clusters come from CLUSTERS_FILE, a JSON list of objects:

    [{"name": "site-b", "slurmrestd_url": "https://slurm-b.example.org:6820",
      "jwt_key_file": "/etc/gpupool/site-b.jwt.key", "cli_prefix": "ssh -o BatchMode=yes slurm-b",
      "api_version": "auto", "gpu_types": ["h100"], "time_zone": "Europe/Berlin",
      "job_root": "/srv/gpupool/jobs", "job_root_local": "/mnt/site-b/jobs"}]

`job_root` is the job directories' root as the cluster's nodes see it, `job_root_local` the same
directories as this portal reads and writes them (a shared file system's mount); a cluster
without them is probed and listed but takes no job of the portal's.

Every entry is checked when the settings load (a bad file stops the process with the entry and
field named) and again by `manage.py check` (the key file readable). The primary entry is
rebuilt from settings on every call, so a test's `settings` override reaches it.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

NAME = re.compile(r"[a-z0-9][a-z0-9.-]{0,31}")
_URL = re.compile(r"https?://[A-Za-z0-9.\-\[\]:]+(:\d+)?/?")
_VERSION = re.compile(r"auto|v0\.0\.\d{2}")
_FIELDS = {
    "name",
    "slurmrestd_url",
    "jwt_key_file",
    "cli_prefix",
    "api_version",
    "gpu_types",
    "time_zone",
    "job_root",
    "job_root_local",
}


class ClusterConfigError(ValueError):
    pass


@dataclass(frozen=True)
class ClusterConfig:
    name: str  # the portal's key for it (URLs, the API, usage records); not Slurm's ClusterName
    slurmrestd_url: str
    jwt_key_file: Path
    cli_prefix: tuple[str, ...]
    api_version: str = "auto"
    # GPU types it offers; empty: whatever its nodes report.
    gpu_types: tuple[str, ...] = field(default_factory=tuple)
    time_zone: str = "UTC"
    primary: bool = False
    # The job directories' root on the cluster and as the portal reaches it; None: it takes no
    # portal job (cluster/files/paths.py maps one to the other).
    job_root: str | None = None
    job_root_local: Path | None = None

    @property
    def takes_jobs(self) -> bool:
        return self.job_root is not None and self.job_root_local is not None

    def offers(self, gpu_type: str) -> bool:
        """Takes portal jobs of this GPU type (no `gpu_types`: whatever its nodes have)."""
        return self.takes_jobs and (not self.gpu_types or gpu_type in self.gpu_types)


def _entry(raw, position: int, known_gpu_types) -> ClusterConfig:
    where = f"cluster {position + 1}"
    if not isinstance(raw, dict):
        raise ClusterConfigError(f"{where}: must be an object")
    unknown = set(raw) - _FIELDS
    if unknown:
        raise ClusterConfigError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")
    name = raw.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ClusterConfigError(f"{where}: name must be 1-32 of a-z, 0-9, '.', '-' (starting with a letter or digit)")
    where = f"cluster {name!r}"
    url = raw.get("slurmrestd_url")
    if not isinstance(url, str) or not _URL.fullmatch(url):
        raise ClusterConfigError(f"{where}: slurmrestd_url must be an http(s) URL with no path")
    key = raw.get("jwt_key_file")
    if not isinstance(key, str) or not key.startswith("/"):
        raise ClusterConfigError(f"{where}: jwt_key_file must be an absolute path")
    prefix = raw.get("cli_prefix", "")
    if not isinstance(prefix, str):
        raise ClusterConfigError(f"{where}: cli_prefix must be a string (split like a shell line, never run by one)")
    version = raw.get("api_version", "auto")
    if not isinstance(version, str) or not _VERSION.fullmatch(version):
        raise ClusterConfigError(f"{where}: api_version must be auto or a version such as v0.0.42")
    gpu_types = raw.get("gpu_types", [])
    if not isinstance(gpu_types, list) or not all(isinstance(t, str) for t in gpu_types):
        raise ClusterConfigError(f"{where}: gpu_types must be a list of GPU type names")
    strangers = [t for t in gpu_types if known_gpu_types is not None and t not in known_gpu_types]
    if strangers:
        raise ClusterConfigError(f"{where}: GPU type(s) {', '.join(strangers)} are not in GPU_TYPES_FILE")
    zone = raw.get("time_zone", "UTC")
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise ClusterConfigError(f"{where}: time_zone {zone!r} is not a known time zone") from None
    roots = [raw.get("job_root"), raw.get("job_root_local")]
    if any(root is not None for root in roots) and not all(
        isinstance(root, str) and root.startswith("/") for root in roots
    ):
        raise ClusterConfigError(f"{where}: job_root and job_root_local go together, each an absolute path")
    return ClusterConfig(
        job_root=roots[0],
        job_root_local=Path(roots[1]) if roots[1] else None,
        name=name,
        slurmrestd_url=url.rstrip("/"),
        jwt_key_file=Path(key),
        cli_prefix=tuple(shlex.split(prefix)),
        api_version=version,
        gpu_types=tuple(gpu_types),
        time_zone=zone,
    )


def parse_clusters(text: str, *, primary_name: str, known_gpu_types=None) -> tuple[ClusterConfig, ...]:
    """The further clusters of a CLUSTERS_FILE's text; raises ClusterConfigError naming the entry."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ClusterConfigError(f"not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise ClusterConfigError("must be a JSON list of clusters")
    clusters = tuple(_entry(item, position, known_gpu_types) for position, item in enumerate(raw))
    names = [primary_name, *(cluster.name for cluster in clusters)]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise ClusterConfigError(
            f"cluster name(s) {', '.join(repeated)} used twice (SLURM_CLUSTER_NAME is {primary_name!r})"
        )
    return clusters


def load_clusters_file(path: Path | None, *, primary_name: str, known_gpu_types=None) -> tuple[ClusterConfig, ...]:
    if path is None:
        return ()
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ClusterConfigError(f"{path}: {exc.strerror}") from None
    try:
        return parse_clusters(text, primary_name=primary_name, known_gpu_types=known_gpu_types)
    except ClusterConfigError as exc:
        raise ClusterConfigError(f"{path}: {exc}") from None


def primary_cluster_name() -> str:
    """The portal's own cluster's name (SLURM_CLUSTER_NAME): what its jobs' rows are keyed by."""
    from django.conf import settings

    return settings.SLURM_CLUSTER_NAME


def primary_cluster() -> ClusterConfig:
    from django.conf import settings

    return ClusterConfig(
        name=settings.SLURM_CLUSTER_NAME,
        slurmrestd_url=settings.SLURMRESTD_URL.rstrip("/"),
        jwt_key_file=Path(settings.SLURM_JWT_KEY_FILE),
        cli_prefix=tuple(settings.SLURM_CLI_PREFIX),
        api_version=settings.SLURM_API_VERSION,
        gpu_types=tuple(settings.GPU_TYPES),
        time_zone=settings.SLURM_USAGE_RESET_TIMEZONE,
        primary=True,
        job_root=settings.SLURM_JOB_ROOT,
        job_root_local=Path(settings.SLURM_JOB_ROOT_LOCAL),
    )


def all_clusters() -> tuple[ClusterConfig, ...]:
    from django.conf import settings

    return (primary_cluster(), *settings.EXTRA_CLUSTERS)


def further_clusters_taking_jobs() -> tuple[ClusterConfig, ...]:
    """The clusters besides the portal's own that take its jobs (those with job roots)."""
    return tuple(cluster for cluster in all_clusters() if not cluster.primary and cluster.takes_jobs)


def cluster_named(name: str) -> ClusterConfig:
    for cluster in all_clusters():
        if cluster.name == name:
            return cluster
    raise KeyError(name)
