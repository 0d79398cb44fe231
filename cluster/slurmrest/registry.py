"""Which adapter serves which data_parser version, and which one to use with a daemon.

`SLURM_API_VERSION=auto` takes the newest version both the daemon and the portal speak;
a pinned version must be one the daemon serves. Versions between those with an adapter
(v0.0.43, v0.0.44) are left to the newest one: a daemon serving them serves v0.0.42 or
v0.0.45 too.
"""

from cluster.errors import SlurmError
from cluster.slurmrest.base import ApiAdapter, ServedApi, version_key
from cluster.slurmrest.v0041 import V0041Adapter
from cluster.slurmrest.v0042 import V0042Adapter
from cluster.slurmrest.v0045 import V0045Adapter

AUTO = "auto"
ADAPTERS: dict[str, type[ApiAdapter]] = {
    adapter.version: adapter for adapter in (V0041Adapter, V0042Adapter, V0045Adapter)
}


class SlurmApiVersionError(SlurmError):
    """The daemon and the portal have no version in common, or the pinned one is not served:
    a configuration problem, not worth retrying."""

    public_default = "The portal cannot speak this cluster's scheduler API; an admin can see why."


def adapter_for(version: str) -> ApiAdapter:
    try:
        return ADAPTERS[version]()
    except KeyError:
        known = ", ".join(sorted(ADAPTERS, key=version_key))
        raise ValueError(f"no adapter for slurmrestd API {version!r} (known: {known})") from None


def choose_version(configured: str, served: ServedApi, where: str = "slurmrestd") -> str:
    """The version to speak: the configured one if the daemon serves it, or with `auto` the
    newest served one that has an adapter."""
    offered = ", ".join(served.versions) or "none"
    daemon = f"{where} (Slurm {served.release or 'of unknown release'}, serving {offered})"
    if configured == AUTO:
        usable = [version for version in served.versions if version in ADAPTERS]
        if not usable:
            known = ", ".join(sorted(ADAPTERS, key=version_key))
            raise SlurmApiVersionError(f"{daemon} serves no API version the portal speaks ({known})")
        return max(usable, key=version_key)
    adapter_for(configured)  # a version without an adapter is a typo: say so first
    if configured not in served.versions:
        raise SlurmApiVersionError(
            f"SLURM_API_VERSION={configured} is not served by {daemon}; set one of those or auto"
        )
    return configured
