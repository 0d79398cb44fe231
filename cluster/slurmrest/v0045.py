"""data_parser v0.0.45 (Slurm 26.05's newest), as v0.0.42 plus its differences:
- `standard_output`/`standard_error` are the raw patterns (`%j.out`); the paths the job
  writes are `stdout_expanded`/`stderr_expanded`;
- `/ping` lost `pinged` and `mode` (`responding` stays);
- reservations can be created and deleted over REST (from v0.0.43), but only with the
  SlurmUser's token: a user's token gets 422 / 2010.
Fields removed since v0.0.42 (`power`, node `tres_weighted`, reservation `watts`) were never
read.
"""

from __future__ import annotations

from dataclasses import replace

from cluster.commands.reservation_request import GpuReservationRequest
from cluster.records.types import Job
from cluster.slurmrest.base import Json
from cluster.slurmrest.v0042 import V0042Adapter


class V0045Adapter(V0042Adapter):
    version = "v0.0.45"
    reservation_writes = True

    def _job(self, item: Json) -> Job:
        job = super()._job(item)
        return replace(
            job,
            standard_output=item.get("stdout_expanded") or job.standard_output,
            standard_error=item.get("stderr_expanded") or job.standard_error,
        )

    def encode_gpu_reservation(self, request: GpuReservationRequest) -> Json:
        body: Json = {
            "name": request.name,
            "start_time": {"set": True, "infinite": False, "number": int(request.start.timestamp())},
            "duration": {"set": True, "infinite": False, "number": request.duration_minutes},
            "users": list(request.users),
            "tres": [{"type": "gres", "name": f"gpu:{request.gpu_type}", "count": request.count}],
        }
        if request.flags:
            body["flags"] = list(request.flags)
        return body
