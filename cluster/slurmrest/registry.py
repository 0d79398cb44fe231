"""Which adapter serves which data_parser version. Add v0.0.40/v0.0.42/v0.0.38 here."""

from cluster.slurmrest.base import ApiAdapter
from cluster.slurmrest.v0041 import V0041Adapter

ADAPTERS: dict[str, type[ApiAdapter]] = {
    V0041Adapter.version: V0041Adapter,
}


def adapter_for(version: str) -> ApiAdapter:
    try:
        return ADAPTERS[version]()
    except KeyError:
        known = ", ".join(sorted(ADAPTERS))
        raise ValueError(f"no adapter for slurmrestd API {version!r} (known: {known})") from None
