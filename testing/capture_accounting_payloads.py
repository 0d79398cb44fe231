"""Recapture the slurmdbd payloads the metering tests read (cluster/tests/payloads/<version>/).

Run against the dev cluster (`make cluster-up`):
    python -m testing.capture_accounting_payloads
It creates a throwaway user, runs to completion a 1-GPU job with an NVMe cache, a shard job
with an NVMe cache, a 1-GPU job requeued once while running, and a 1-GPU job that keeps a CPU busy
and holds 200 MB for longer than JobAcctGatherFrequency (its steps' CPU time and memory peak, which
the job's efficiency reads), and saves what slurmrestd's `slurmdb/job/{id}` answered for each (the
requeued job's has two runs).
"""

import json
import time

from django.conf import settings
from django.core.management.base import BaseCommand

from cluster.clusters.services import rest_client, slurm_cli
from cluster.commands.provisioning import LocalProvisioner
from testing.capture_slurm_payloads import PAYLOAD_DIR
from testing.slurm import submission, wait_for_state, wait_until_requeued

CAPTURE_USER = "ptcapacct"
# 200 MB held by `tail` (no newline in /dev/zero) while the shell spins, past the 30 s gather interval.
SAMPLED = (
    "( head -c 200M /dev/zero; sleep 40 ) | tail >/dev/null & end=$((SECONDS + 38)); "
    "while [ $SECONDS -lt $end ]; do :; done; wait"
)


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def handle(self, *args, **options):
        service = rest_client()
        adapter = service.adapter
        out = PAYLOAD_DIR / adapter.version
        out.mkdir(parents=True, exist_ok=True)
        cli = slurm_cli()
        backend = LocalProvisioner(cli, settings.SLURM_ACCOUNT)
        backend.ensure_user(CAPTURE_USER, ["normal", "pro"], "pro", adopt_existing=True)  # our own capture user
        user = service.as_user(CAPTURE_USER)
        try:
            jobs = {
                "accounting_gpu_nvme": user.submit_job(
                    submission("sleep 6", tres_per_node="gres/gpu:a100:1,gres/nvme:500", name="capture-nvme")
                ),
                "accounting_shard": user.submit_job(
                    submission("sleep 6", tres_per_node="gres/shard:a100:3,gres/nvme:100", name="capture-shard")
                ),
                "accounting_requeued": user.submit_job(
                    submission("sleep 8", tres_per_node="gres/gpu:rtx4090:1", name="capture-requeue")
                ),
                "accounting_sampled": user.submit_job(
                    submission(
                        SAMPLED, tres_per_node="gres/gpu:rtx4090:1", name="capture-sampled", time_limit_minutes=3
                    )
                ),
            }
            requeued = jobs["accounting_requeued"]
            wait_for_state(user, requeued, {"RUNNING"})
            time.sleep(3)
            cli.requeue_job(requeued)
            # Once the run has finished completing (a StartTime set before is overwritten), and a
            # second after the requeue's credential revocation (slurmd refuses a launch as old).
            wait_until_requeued(user, requeued)
            cli.run("scontrol", "update", f"JobId={requeued}", "StartTime=now+1")  # not in ~2 min
            for job_id in jobs.values():
                wait_for_state(user, job_id, {"COMPLETED"}, timeout=300)
            for name, job_id in jobs.items():
                runs = 2 if job_id == requeued else 1
                self._save(out / f"{name}.json", service, adapter.slurmdb_path(f"job/{job_id}"), runs)
        finally:
            cli.run("scancel", "-u", CAPTURE_USER, check=False)
            backend.remove_user(CAPTURE_USER)
        self.stdout.write(f"saved to {out}")

    def _save(self, path, service, url, runs):
        # slurmdbd hears of the end after slurmctld: wait until every run is settled.
        deadline = time.monotonic() + 60
        while True:
            status, payload = service.raw("GET", url)
            records = service.adapter.decode_accounting(payload) if isinstance(payload, dict) else []
            if len(records) == runs and all(record.run_is_settled for record in records):
                break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{url}: slurmdbd did not settle {runs} runs in time")
            time.sleep(0.5)
        payload.pop("meta", None)  # host names, versions and timestamps of the capture machine
        path.write_text(json.dumps({"status": status, "body": payload}, indent=1, sort_keys=True))
        self.stdout.write(f"  {path.name}: HTTP {status}, {runs} run(s)")


if __name__ == "__main__":
    from testing.run_command import run_as_script

    run_as_script(Command)
