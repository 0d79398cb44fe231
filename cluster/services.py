"""Builds the Slurm clients from settings; everything else asks here for one."""

from __future__ import annotations

from functools import cache
from pathlib import PurePosixPath

from django.conf import settings

from cluster.cli import SlurmCli
from cluster.paths import JobPathMap
from cluster.slurmrest.client import SlurmRestClient
from cluster.slurmrest.registry import adapter_for
from cluster.tokens import TokenMinter


@cache
def _minter() -> TokenMinter:
    return TokenMinter(settings.SLURM_JWT_KEY_FILE, settings.SLURM_JWT_LIFETIME_SECONDS)


def rest_client(user_name: str | None = None) -> SlurmRestClient:
    """A client acting as `user_name`, or as the service user that reads the whole cluster."""
    return SlurmRestClient(
        settings.SLURMRESTD_URL,
        adapter_for(settings.SLURM_API_VERSION),
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
