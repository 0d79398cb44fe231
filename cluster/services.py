"""Builds the Slurm clients from settings; everything else asks here for one."""

from __future__ import annotations

from functools import cache
from pathlib import PurePosixPath

from django.conf import settings

from cluster.cli import SlurmCli
from cluster.paths import JobPathMap
from cluster.slurmrest.base import ApiAdapter, ServedApi
from cluster.slurmrest.client import SlurmRestClient, discover
from cluster.slurmrest.registry import adapter_for, choose_version
from cluster.tokens import TokenMinter


@cache
def _minter() -> TokenMinter:
    return TokenMinter(settings.SLURM_JWT_KEY_FILE, settings.SLURM_JWT_LIFETIME_SECONDS)


@cache
def _served(base_url: str) -> ServedApi:
    """Once per process and daemon (the answer is ~1.6 MB); a failure is not cached, so the
    next call asks again."""
    return discover(
        base_url, _minter(), user_name=settings.SLURM_SERVICE_USER, timeout=settings.SLURM_REQUEST_TIMEOUT_SECONDS
    )


def served_api() -> ServedApi:
    """The Slurm release and API versions of the configured slurmrestd."""
    return _served(settings.SLURMRESTD_URL)


def api_version() -> str:
    """The version the portal speaks: SLURM_API_VERSION, or with `auto` the newest the daemon
    and the portal share. Raises SlurmApiVersionError when the pinned one is not served."""
    return choose_version(settings.SLURM_API_VERSION, served_api(), settings.SLURMRESTD_URL)


def _adapter() -> ApiAdapter:
    return adapter_for(api_version())


def rest_client(user_name: str | None = None) -> SlurmRestClient:
    """A client acting as `user_name`, or as the service user that reads the whole cluster.
    The API version is settled on its first call, not here."""
    return SlurmRestClient(
        settings.SLURMRESTD_URL,
        _adapter,
        _minter(),
        user_name=user_name or settings.SLURM_SERVICE_USER,
        timeout=settings.SLURM_REQUEST_TIMEOUT_SECONDS,
    )


def slurm_cli() -> SlurmCli:
    return SlurmCli(
        prefix=list(settings.SLURM_CLI_PREFIX),
        noop=settings.SLURM_CLI_NOOP,
        timeout=settings.SLURM_CLI_TIMEOUT_SECONDS,
    )


def job_paths() -> JobPathMap:
    return JobPathMap(PurePosixPath(settings.SLURM_JOB_ROOT), settings.SLURM_JOB_ROOT_LOCAL)
