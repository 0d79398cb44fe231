"""Builds the Slurm clients from settings; everything else asks here for one."""

from __future__ import annotations

from functools import cache
from pathlib import Path, PurePosixPath

from django.conf import settings

from cluster.clusters.registry import ClusterConfig, cluster_named, primary_cluster
from cluster.commands.cli import SlurmCli
from cluster.files.paths import JobPathMap
from cluster.slurmrest.base import ServedApi
from cluster.slurmrest.client import SlurmRestClient, discover
from cluster.slurmrest.registry import adapter_for, choose_version
from cluster.slurmrest.tokens import TokenMinter


@cache
def _minter(key_file: Path) -> TokenMinter:
    return TokenMinter(key_file, settings.SLURM_JWT_LIFETIME_SECONDS)


# Each daemon's OpenAPI answer (~1.6 MB), read once per process; a failure is not kept, so the
# next call asks again.
_served_apis: dict[tuple[str, Path], ServedApi] = {}


def _served(base_url: str, key_file: Path, timeout: float | None = None) -> ServedApi:
    served = _served_apis.get((base_url, key_file))
    if served is None:
        served = discover(
            base_url,
            _minter(key_file),
            user_name=settings.SLURM_SERVICE_USER,
            timeout=timeout or settings.SLURM_REQUEST_TIMEOUT_SECONDS,
        )
        _served_apis[(base_url, key_file)] = served
    return served


def _cluster(name: str | None) -> ClusterConfig:
    """The named cluster (cluster/clusters/registry.py), or the portal's own (the SLURM_* settings)."""
    return primary_cluster() if name is None else cluster_named(name)


def served_api(cluster: str | None = None, *, timeout: float | None = None) -> ServedApi:
    """The Slurm release and API versions of a cluster's slurmrestd (the portal's own by default).
    `timeout`: for the first read only (a probe's, shorter than a request's)."""
    config = _cluster(cluster)
    return _served(config.slurmrestd_url, config.jwt_key_file, timeout)


def api_version(cluster: str | None = None) -> str:
    """The version the portal speaks: the cluster's pinned one (SLURM_API_VERSION for the
    portal's own), or with `auto` the newest the daemon and the portal share. Raises
    SlurmApiVersionError when the pinned one is not served."""
    config = _cluster(cluster)
    return choose_version(config.api_version, served_api(cluster), config.slurmrestd_url)


def rest_client(
    user_name: str | None = None, *, cluster: str | None = None, timeout: float | None = None
) -> SlurmRestClient:
    """A client acting as `user_name`, or as the service user that reads the whole cluster.
    The API version is settled on its first call, not here."""
    config = _cluster(cluster)
    return SlurmRestClient(
        config.slurmrestd_url,
        lambda: adapter_for(api_version(cluster)),
        _minter(config.jwt_key_file),
        user_name=user_name or settings.SLURM_SERVICE_USER,
        timeout=timeout or settings.SLURM_REQUEST_TIMEOUT_SECONDS,
        on_endpoint_missing=lambda: forget_served_api(config.slurmrestd_url, config.jwt_key_file),
    )


def forget_served_api(base_url: str, key_file: Path) -> None:
    """The daemon at `base_url` is asked again what it serves (it was upgraded under the portal)."""
    _served_apis.pop((base_url, key_file), None)


def slurm_cli(cluster: str | None = None) -> SlurmCli:
    return SlurmCli(
        prefix=list(_cluster(cluster).cli_prefix),
        noop=settings.SLURM_CLI_NOOP,
        timeout=settings.SLURM_CLI_TIMEOUT_SECONDS,
    )


def job_paths(cluster: str | None = None) -> JobPathMap:
    """Where a cluster's job directories are, on it and here. Raises ValueError for a cluster
    configured without them (it takes no portal job)."""
    if cluster is None:
        return JobPathMap(PurePosixPath(settings.SLURM_JOB_ROOT), settings.SLURM_JOB_ROOT_LOCAL)
    config = _cluster(cluster)
    if not config.takes_jobs:
        raise ValueError(f"cluster {cluster} has no job_root: it takes no portal job")
    return JobPathMap(PurePosixPath(config.job_root), Path(config.job_root_local))
