"""data_parser v0.0.42: the one version both Slurm 24.11 and 26.05 serve.

Every field the portal reads or sends has the v0.0.41 shape (compared on payloads captured
from both generations), so this is the v0.0.41 adapter with its differences only:
- `/ping` reports `responding` (a bool) beside the old `pinged` text;
- the job submit response has no `result` copy (the id is read from `job_id`, as before);
- submit errors answer 422 on 26.05 (500 on 24.11), with the same `errors[]` the client reads;
- job fields the portal never read (`exclusive`, `oversubscribe`, `show_flags`) are gone.
"""

from __future__ import annotations

from cluster.slurmrest.base import Json
from cluster.slurmrest.v0041 import V0041Adapter


class V0042Adapter(V0041Adapter):
    version = "v0.0.42"

    def decode_controller_responding(self, payload: Json) -> bool:
        return any(bool(item.get("responding")) for item in payload.get("pings", []))
