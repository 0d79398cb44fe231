"""Recapture the slurmrestd payloads the adapter tests read (cluster/tests/payloads/).

Run against the dev cluster (`make cluster-up`), then `make test`:
    python manage.py capture_slurm_payloads
It creates a throwaway user, runs a GPU job and a shard job, holds a reservation, and
saves what slurmrestd answered (status and body) for each call, errors included.
"""

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from cluster.provisioning import LocalProvisioner
from cluster.services import rest_client, slurm_cli
from cluster.tokens import TokenMinter
from testing.slurm import submission, wait_for_state

PAYLOAD_DIR = Path(__file__).resolve().parents[2] / "tests" / "payloads"
CAPTURE_USER = "ptcapture"
OTHER_USER = "ptcapture2"


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def handle(self, *args, **options):
        service = rest_client()
        adapter = service.adapter
        out = PAYLOAD_DIR / adapter.version
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

        gpu_submission = submission("sleep 20; echo done", tres_per_node="gres/gpu:a100:1", name="capture-gpu")
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

        other = service.as_user(OTHER_USER)
        save("cancel_refused", other, "DELETE", adapter.slurm_path("jobs/"), {"jobs": [str(gpu_job)]})

        cli.create_gpu_reservation(
            "capture_resv",
            gpu_type="a100",
            count=2,
            users=[CAPTURE_USER],
            start=datetime.now(UTC) + timedelta(days=1),
            duration_minutes=120,
        )
        try:
            save("reservations", service, "GET", adapter.slurm_path("reservations/"))
        finally:
            cli.delete_reservation("capture_resv", check=False)

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
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            status, payload = service.raw("GET", adapter.slurmdb_path(f"job/{gpu_job}"))
            jobs = payload.get("jobs", []) if isinstance(payload, dict) else []
            if jobs and "COMPLETED" in jobs[0].get("state", {}).get("current", []):
                break
            time.sleep(0.5)
        save("accounting_completed", service, "GET", adapter.slurmdb_path(f"job/{gpu_job}"))
        for name in (CAPTURE_USER, OTHER_USER):
            cli.run("scancel", "-u", name, check=False)
            backend.remove_user(name)
        self.stdout.write(f"saved to {out}")
