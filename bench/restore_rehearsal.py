"""Restore rehearsal: a backup restored on the dev stack, and what the reconcile recovered.

    .venv/bin/python bench/restore_rehearsal.py [--users 2] [--before 3] [--after 4]

On a fresh database of its own and the dev cluster (SLURM_RELEASE), provisioned users run `--before`
jobs each to their end, metered and charged; `manage.py backup` is taken; then each runs `--after`
more jobs (the work the backup never saw), one of them still running when the database is lost. A new,
empty database gets `manage.py restore` (restore, migrate, reconcile from slurmdbd). Then it compares
the restored database with the lost one: jobs (by Slurm id, with their portal ids), usage records (by
their key, with their seconds and amounts) and charges; once the running job ends, a second reconcile
settles it and must double nothing. Figures, not a test (gpupool/tests/test_restore.py is the test).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import psycopg  # noqa: E402
from _common import BASE_DIR, bench_database, make_user, options, retire_user  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.utils import timezone  # noqa: E402

SPEC = {
    "name": "rehearsal",
    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
    "gpu_type": "rtx4090",
    "gpu_count": 1,
    "command": "sleep 2",
    "time_limit_minutes": 5,
}


def _url(dbname: str) -> str:
    database = settings.DATABASES["default"]
    return (
        f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{dbname}"
    )


def _submit(user, command: str = "sleep 2"):
    from jobs import actions
    from jobs.submission.spec import SpecPolicy, parse_job_spec
    from plans.catalog import plan_for

    spec = parse_job_spec({**SPEC, "command": command}, plan=plan_for(user), policy=SpecPolicy.from_settings())
    job = actions.submit(user, spec)
    job.refresh_from_db()
    if not job.slurm_job_id:
        raise RuntimeError(f"not submitted: {job.error}")
    return job


def _wait(what: str, probe, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(1)
    raise RuntimeError(f"gave up waiting for {what}")


def _run_all(jobs) -> None:
    from billing.models import UsageRecord
    from billing.usage.metering import run_metering
    from cluster.clusters.services import rest_client
    from jobs.mirror.passes import mirror_jobs
    from jobs.models import FINAL_STATES, Job

    ids = [job.slurm_job_id for job in jobs]
    # The mirror (the beat's, in the portal) brings the ends to the rows: the plan's quota reads them.
    _wait(
        "the jobs to end",
        lambda: (
            mirror_jobs(rest_client()) is not None
            and not Job.objects.filter(slurm_job_id__in=ids).exclude(state__in=FINAL_STATES).exists()
        ),
    )
    _wait(
        "every run metered",
        lambda: run_metering() is not None and UsageRecord.objects.filter(slurm_job_id__in=ids).count() >= len(ids),
    )


JOBS_SQL = "SELECT slurm_job_id, uuid, state FROM jobs_job WHERE cluster_user = ANY(%s)"
USAGE_SQL = (
    "SELECT cluster, slurm_job_id, run_start, seconds, amount, charged_at IS NOT NULL FROM billing_usagerecord "
    "WHERE user_id IN (SELECT user_id FROM accounts_profile WHERE cluster_username = ANY(%s))"
)


def _snapshot(url: str, names: list[str]) -> tuple[dict, dict]:
    with psycopg.connect(url) as db:
        jobs = {row[0]: (row[1], row[2]) for row in db.execute(JOBS_SQL, [names])}
        usage = {}
        for cluster, job_id, start, seconds, amount, charged in db.execute(USAGE_SQL, [names]):
            usage.setdefault((cluster, job_id, start), []).append((seconds, Decimal(amount), charged))
    return jobs, usage


def _compare(original: tuple[dict, dict], restored: tuple[dict, dict]) -> dict:
    jobs, usage = original
    back_jobs, back_usage = restored
    return {
        "jobs": len(jobs),
        "jobs recovered": sum(1 for i in jobs if i in back_jobs),
        "jobs lost": sum(1 for i in jobs if i not in back_jobs),
        "jobs doubled": sum(1 for i in back_jobs if i not in jobs),
        "portal ids kept": sum(1 for i, (ident, _) in jobs.items() if back_jobs.get(i, (None,))[0] == ident),
        "usage records": len(usage),
        "usage recovered": sum(1 for key in usage if key in back_usage),
        "usage lost": sum(1 for key in usage if key not in back_usage),
        "usage doubled": sum(len(rows) - 1 for rows in back_usage.values())
        + sum(1 for k in back_usage if k not in usage),
        "amounts differing": sum(
            1 for key, rows in usage.items() if key in back_usage and back_usage[key][0][:2] != rows[0][:2]
        ),
        "charged": sum(1 for rows in back_usage.values() if rows[0][2]),
        "money": (
            sum((rows[0][1] for rows in usage.values()), Decimal(0)),
            sum((rows[0][1] for rows in back_usage.values()), Decimal(0)),
        ),
    }


def main():
    args = options(users=2, before=3, after=4)
    manage_env = {**os.environ, "DEBUG": "1"}
    with bench_database() as source, tempfile.TemporaryDirectory() as scratch:
        os.environ["DATABASE_URL"] = _url(source)
        users = [make_user(f"rr{uuid.uuid4().hex[:6]}{i}") for i in range(args.users)]
        names = [user.profile.cluster_username for user in users]
        target = f"restore_rehearsal_{uuid.uuid4().hex[:8]}"
        try:
            print(f"{args.users} users, {args.before} jobs each before the backup...", flush=True)
            _run_all([_submit(user) for user in users for _ in range(args.before)])
            folder = Path(scratch) / "backup"
            started = time.monotonic()
            call_command("backup", str(folder))
            backup_seconds = time.monotonic() - started
            print(f"backup written in {backup_seconds:.1f} s; {args.after} jobs each after it...", flush=True)
            after = [_submit(user) for user in users for _ in range(args.after - 1)]
            running = _submit(users[0], command="sleep 45")
            _run_all(after)
            lost_db = _snapshot(_url(source), names)

            with psycopg.connect(_url("postgres"), autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{target}"')
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "manage.py", "restore", str(folder)],
                cwd=BASE_DIR, env={**manage_env, "DATABASE_URL": _url(target)}, capture_output=True, text=True,
            )  # fmt: skip
            restore_seconds = time.monotonic() - started
            if done.returncode != 0:
                raise RuntimeError(f"restore failed:\n{done.stdout}\n{done.stderr}")
            first = _compare(lost_db, _snapshot(_url(target), names))

            # The job that ran through the loss ends; a second reconcile settles it and doubles nothing.
            _run_all([running])
            since = (timezone.now() - timedelta(hours=1)).isoformat()
            again = subprocess.run(
                [sys.executable, "manage.py", "reconcile", "--since", since],
                cwd=BASE_DIR, env={**manage_env, "DATABASE_URL": _url(target)}, capture_output=True, text=True,
            )  # fmt: skip
            if again.returncode != 0:
                raise RuntimeError(f"reconcile failed:\n{again.stdout}\n{again.stderr}")
            truth = _snapshot(_url(source), names)
            second = _compare(truth, _snapshot(_url(target), names))
            with psycopg.connect(_url(target)) as db:
                (state,) = db.execute(
                    "SELECT state FROM jobs_job WHERE slurm_job_id = %s", [running.slurm_job_id]
                ).fetchone()
        finally:
            for user in users:
                retire_user(user)
            with psycopg.connect(_url("postgres"), autocommit=True) as admin:
                admin.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')

    print()
    print(
        f"Slurm {settings.SLURM_RELEASE}; backup {backup_seconds:.1f} s; "
        f"restore + migrate + reconcile {restore_seconds:.1f} s"
    )
    print(done.stdout.strip())
    for label, figures in (("after the restore", first), ("after the running job ended, reconciled again", second)):
        money_lost, money_back = figures.pop("money")
        print(f"{label}:")
        print(
            f"  jobs: {figures['jobs recovered']} of {figures['jobs']} recovered, {figures['jobs lost']} lost, "
            f"{figures['jobs doubled']} doubled; portal ids kept {figures['portal ids kept']}"
        )
        print(
            f"  usage records: {figures['usage recovered']} of {figures['usage records']} recovered, "
            f"{figures['usage lost']} lost, {figures['usage doubled']} doubled, {figures['amounts differing']} with "
            f"other seconds or amount; {figures['charged']} charged; ${money_lost} before, ${money_back} after"
        )
    print(f"the job running through the loss: {state} in the restored database")


if __name__ == "__main__":
    main()
