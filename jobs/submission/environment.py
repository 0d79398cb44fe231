"""Environment the portal adds to a job's submission (never the user's: their variables are in the
batch script, checked by jobs.submission.spec). Layers above jobs register what their jobs need
(interactive/ adds a session's server token) in their AppConfig.ready()."""

from __future__ import annotations

from collections.abc import Callable

# Slurm's REST API makes a job inherit nothing: without PATH the batch script finds no programs.
BASE_ENVIRONMENT = {"PATH": "/usr/bin:/bin"}

_providers: list[Callable] = []


def register_environment(provider: Callable) -> None:
    """`provider(job) -> dict[str, str]`: variables for this job's submission ({} for none)."""
    if provider not in _providers:
        _providers.append(provider)


def submission_environment(job) -> dict[str, str]:
    """{} when no provider adds anything (the submission then sends Slurm's default)."""
    added: dict[str, str] = {}
    for provider in _providers:
        added.update(provider(job))
    return {**BASE_ENVIRONMENT, **added} if added else {}
