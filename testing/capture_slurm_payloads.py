"""Recapture the slurmrestd payloads the adapter tests read (cluster/tests/payloads/<version>/).

Run against a dev cluster (`make cluster-up [SLURM_RELEASE=26.05]`), then the adapter tests:
    python -m testing.capture_slurm_payloads --release 26.05 --api-version all
`--release` picks the cluster (as SLURM_RELEASE does); `--api-version` one version the daemon
serves, or `all` of those the portal has an adapter for (default: the one in use).
It creates throwaway users, runs a GPU job and a shard job, holds a reservation, and saves
what slurmrestd answered (status and body) for each call, errors included.
"""

import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cluster.clusters.services import api_version, rest_client, served_api, slurm_cli
from cluster.commands.provisioning import LocalProvisioner
from cluster.commands.reservation_request import GpuReservationRequest
from cluster.slurmrest.base import version_key
from cluster.slurmrest.registry import ADAPTERS, adapter_for
from cluster.slurmrest.tokens import TokenMinter
from testing.slurm import new_job_dir, submission, wait_for_state

PAYLOAD_DIR = Path(__file__).resolve().parents[1] / "cluster" / "tests" / "payloads"
CAPTURE_USER = "ptcapture"
OTHER_USER = "ptcapture2"
# Settings that SLURM_RELEASE derives; set by hand they would keep pointing at one cluster.
_RELEASE_DERIVED = (
    "DEVCLUSTER_DIR",
    "SLURMRESTD_URL",
    "SLURM_JWT_KEY_FILE",
    "SLURM_CLI_PREFIX",
    "SLURM_JOB_ROOT_LOCAL",
    "SLURM_API_VERSION",
)


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("--release", help="the dev cluster to capture from (24.11, 26.05); default SLURM_RELEASE")
        parser.add_argument("--api-version", default="", help="vX.Y.Z, or all (default: the version in use)")

    def handle(self, *args, release=None, **options):
        requested = options["api_version"]
        if release and release != settings.SLURM_RELEASE:
            # Settings are read once per process: start again with the other cluster's.
            environment = {key: value for key, value in os.environ.items() if key not in _RELEASE_DERIVED}
            environment["SLURM_RELEASE"] = release
            arguments = [sys.executable, "-m", "testing.capture_slurm_payloads", *sys.argv[1:]]
            os.execve(sys.executable, arguments, environment)
        served = served_api()
        if not requested:
            versions = [api_version()]
        elif requested == "all":
            versions = sorted((v for v in served.versions if v in ADAPTERS), key=version_key)
        elif requested in served.versions:
            versions = [requested]
        else:
            raise CommandError(f"{requested} is not served by Slurm {served.release} ({', '.join(served.versions)})")
        # What version detection reads, without the 1.6 MB of schemas.
        _status, document = rest_client().raw("GET", "/openapi/v3")
        trimmed = {"info": document["info"], "paths": dict.fromkeys(sorted(document["paths"]), {})}
        (PAYLOAD_DIR / f"openapi-{settings.SLURM_RELEASE}.json").write_text(json.dumps(trimmed, indent=1))
        for version in versions:
            self.stdout.write(f"Slurm {served.release}, {version}:")
            self.capture(version)

    def capture(self, version: str) -> None:
        adapter = adapter_for(version)
        base = rest_client()
        service = base.__class__(base.base_url, adapter, base.minter, user_name=base.user_name, timeout=base.timeout)
        out = PAYLOAD_DIR / version
        out.mkdir(parents=True, exist_ok=True)
        cli = slurm_cli()
        backend = LocalProvisioner(cli, settings.SLURM_ACCOUNT)
        for name in (CAPTURE_USER, OTHER_USER):
            backend.ensure_user(name, ["normal", "pro"], "pro", adopt_existing=True)  # our own capture users
        user = service.as_user(CAPTURE_USER)

        def save(name, client, method, path, body=None):
            status, payload = client.raw(method, path, body=body)
            if isinstance(payload, dict):
                payload.pop("meta", None)  # host names, versions and timestamps of the capture machine
            (out / f"{name}.json").write_text(json.dumps({"status": status, "body": payload}, indent=1, sort_keys=True))
            self.stdout.write(f"  {name}: HTTP {status}")
            return payload

        # stderr with a %j pattern: v0.0.45 answers the pattern and the path apart.
        directory = new_job_dir()
        gpu_submission = submission(
            "sleep 20; echo done",
            directory=directory,
            tres_per_node="gres/gpu:a100:1",
            name="capture-gpu",
            standard_error=f"{directory}/%j.err",
        )
        submitted = save(
            "submit_ok", user, "POST", adapter.slurm_path("job/submit"), adapter.encode_submission(gpu_submission)
        )
        gpu_job = int(submitted["job_id"])
        shard_job = user.submit_job(submission("sleep 20", tres_per_node="gres/shard:a100:3", name="capture-shard"))
        wait_for_state(user, gpu_job, {"RUNNING"})
        wait_for_state(user, shard_job, {"RUNNING"})
        save("job_running", user, "GET", adapter.slurm_path(f"job/{gpu_job}"))
        save("jobs_state", service, "GET", adapter.slurm_path("jobs/state/"))
        save("nodes_busy", service, "GET", adapter.slurm_path("nodes/"))
        save("partitions", service, "GET", adapter.slurm_path("partitions/"))
        save("ping", service, "GET", adapter.slurm_path("ping/"))

        other = service.as_user(OTHER_USER)
        save("cancel_refused", other, "DELETE", adapter.slurm_path("jobs/"), {"jobs": [str(gpu_job)]})
        save("cancel_missing", service, "DELETE", adapter.slurm_path("jobs/"), {"jobs": ["999999999"]})

        start = datetime.now(UTC).replace(second=0, microsecond=0) + timedelta(days=1)
        cli.create_gpu_reservation(
            GpuReservationRequest(
                "capture_resv", gpu_type="a100", count=2, users=[CAPTURE_USER], start=start, duration_minutes=120
            )
        )
        try:
            save("reservations", service, "GET", adapter.slurm_path("reservations/"))
        finally:
            cli.delete_reservation("capture_resv", check=False)
        if adapter.reservation_writes:
            body = adapter.encode_gpu_reservation(
                GpuReservationRequest(
                    "capture_rest", gpu_type="a100", count=1, users=[CAPTURE_USER], start=start, duration_minutes=60
                )
            )
            try:
                save("reservation_create_as_user", user, "POST", adapter.slurm_path("reservation"), body)
                save("reservation_create", service, "POST", adapter.slurm_path("reservation"), body)
                save("reservation_delete", service, "DELETE", adapter.slurm_path("reservation/capture_rest"))
                save("reservation_delete_missing", service, "DELETE", adapter.slurm_path("reservation/capture_rest"))
            finally:
                cli.delete_reservation("capture_rest", check=False)

        save(
            "submit_too_many_gpus",
            user,
            "POST",
            adapter.slurm_path("job/submit"),
            # QOS `normal` has no GPU limits, so Slurm's own node check answers (2014).
            adapter.encode_submission(submission("true", tres_per_node="gres/gpu:a100:9", qos="normal")),
        )
        save("job_missing", service, "GET", adapter.slurm_path("job/999999999"))
        wrong_key = PAYLOAD_DIR / ".wrong.key"
        wrong_key.write_bytes(b"w" * 32)
        try:
            bad = service.__class__(service.base_url, adapter, TokenMinter(wrong_key), user_name="slurm")
            save("bad_token_jobs", bad, "GET", adapter.slurm_path("jobs/state/"))
            save("bad_token_nodes", bad, "GET", adapter.slurm_path("nodes/"))
        finally:
            wrong_key.unlink()

        wait_for_state(user, gpu_job, {"COMPLETED"}, timeout=120)
        save("job_completed", user, "GET", adapter.slurm_path(f"job/{gpu_job}"))
        save("cancel_done", user, "DELETE", adapter.slurm_path("jobs/"), {"jobs": [str(gpu_job)]})
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, payload = service.raw("GET", adapter.slurmdb_path(f"job/{gpu_job}"))
            jobs = payload.get("jobs", []) if isinstance(payload, dict) else []
            if jobs and "COMPLETED" in jobs[0].get("state", {}).get("current", []):
                break
            time.sleep(0.5)
        save("accounting_completed", service, "GET", adapter.slurmdb_path(f"job/{gpu_job}"))
        self.capture_array(adapter, user, service, save)
        for name in (CAPTURE_USER, OTHER_USER):
            cli.run("scancel", "-u", name, check=False)
            backend.remove_user(name)
        self.stdout.write(f"saved to {out}")

    def capture_array(self, adapter, user, service, save) -> None:
        """A job array (jobs/mirror/arrays.py reads these): 6 tasks, 2 at once, task 1 failing;
        the listing and the array's records while tasks 3-5 wait, then after the last task was
        cancelled (26.05 empties the pending record's task string), and slurmdbd's records."""
        directory = new_job_dir()
        script = 'echo task $SLURM_ARRAY_TASK_ID; [ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 3; sleep 8'
        body = adapter.encode_submission(
            submission(
                script,
                directory=directory,
                tres_per_node="gres/gpu:rtx4090:1",
                name="capture-array",
                standard_output=f"{directory}/%a.out",
                comment="gpupool:capture-array",
                array="0-5%2",
            )
        )
        array_id = int(user._request("POST", adapter.slurm_path("job/submit"), body=body)["job_id"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            records = service.get_array_jobs(array_id)
            if sum(record.state == "RUNNING" for record in records) == 2 and any(r.state == "FAILED" for r in records):
                break
            time.sleep(0.5)
        save("array_jobs_state", service, "GET", adapter.slurm_path("jobs/state/"))
        save("array_job_pending", service, "GET", adapter.slurm_path(f"job/{array_id}"))
        while time.monotonic() < deadline + 60:
            records = service.get_array_jobs(array_id)
            if all(record.state != "RUNNING" for record in records if record.array_task_id in (3, 4)) and any(
                record.array_task_id is None or record.array_task_id == 5 for record in records
            ):
                break
            time.sleep(0.5)
        user.cancel_array(array_id, task_ids=[5])
        time.sleep(2)
        save("array_job_ended", service, "GET", adapter.slurm_path(f"job/{array_id}"))
        time.sleep(3)
        save("array_accounting", service, "GET", adapter.slurmdb_path(f"job/{array_id}"))


if __name__ == "__main__":
    from testing.run_command import run_as_script

    run_as_script(Command)
