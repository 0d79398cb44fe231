"""manage.py restore DIR on the real cluster and PostgreSQL: a backup taken after one job, a second job
run after it, then the backup restored into an empty database and reconciled from slurmdbd. The
restored database has both jobs (the second under its own portal id, from its comment in slurmdbd)
and both runs' usage records and charges, equal to the original's; a second reconcile doubles nothing.
A backup that does not match its manifest, or a database in use, is refused and nothing changes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from decimal import Decimal

import psycopg
import pytest
from django.conf import settings
from django.core.management import CommandError, call_command
from django.db import connection

from billing.models import UsageRecord
from billing.usage.metering import run_metering
from cluster.clusters.services import rest_client
from gpupool.backup import MANIFEST
from jobs import actions
from jobs.models import Job
from jobs.protocol import slurm_comment
from jobs.submission.spec import SpecPolicy, parse_job_spec
from jobs.tests.conftest import GOOD_SPEC
from plans.catalog import plan_for
from testing.slurm import wait_for, wait_for_state

BASE_DIR = settings.BASE_DIR


def _postgres(dbname: str) -> str:
    database = settings.DATABASES["default"]
    return (
        f"postgres://{database['USER']}:{database['PASSWORD']}@{database['HOST'] or '127.0.0.1'}:"
        f"{database['PORT'] or 5432}/{dbname}"
    )


def _admin_sql(statement: str) -> None:
    with psycopg.connect(_postgres("postgres"), autocommit=True) as admin:
        admin.execute(statement)


def _manage(*args: str, database: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DATABASE_URL": _postgres(database), "DEBUG": "1"}
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=BASE_DIR, env=env, capture_output=True, text=True, timeout=300
    )


def _run_to_the_end(user, name: str) -> Job:
    spec = {**GOOD_SPEC, "name": name, "command": "sleep 2"}
    job = actions.submit(user, parse_job_spec(spec, plan=plan_for(user), policy=SpecPolicy.from_settings()))
    job.refresh_from_db()
    assert job.slurm_job_id, job.error
    wait_for_state(rest_client(), job.slurm_job_id, {"COMPLETED"})
    wait_for(
        lambda: run_metering() is not None and UsageRecord.objects.filter(slurm_job_id=job.slurm_job_id).exists(),
        timeout=120,
        interval=1,
        what=f"{name}'s run metered",
    )
    return Job.objects.get(pk=job.pk)


def _usage(rows) -> dict:
    return {
        (cluster, job_id, start.isoformat() if hasattr(start, "isoformat") else str(start)): (seconds, Decimal(amount))
        for cluster, job_id, start, seconds, amount in rows
    }


@pytest.mark.slurm
@pytest.mark.django_db(transaction=True)
def test_a_restored_backup_is_reconciled_from_slurm_without_loss_or_doubling(alice, provision, settings, tmp_path):
    settings.SUBMIT_INLINE = True
    provision(alice)
    before = _run_to_the_end(alice, "before-backup")
    folder = tmp_path / "backup"
    call_command("backup", str(folder))
    after = _run_to_the_end(alice, "after-backup")  # only Slurm and the original database know it
    # slurmdbd keeps the job's comment (AccountingStoreFlags=job_comment): a job slurmctld has
    # forgotten (MinJobAge) still comes back under its portal id.
    assert rest_client().get_accounting(after.slurm_job_id).comment == slurm_comment(after)
    original_usage = _usage(
        UsageRecord.objects.filter(user=alice).values_list("cluster", "slurm_job_id", "run_start", "seconds", "amount")
    )
    assert len(original_usage) == 2

    target = f"restore_{uuid.uuid4().hex[:10]}"
    _admin_sql(f'CREATE DATABASE "{target}"')
    try:
        restored = _manage("restore", str(folder), database=target)
        assert restored.returncode == 0, restored.stderr + restored.stdout
        assert "jobs given back their row" in restored.stdout and "restored and reconciled" in restored.stdout
        with psycopg.connect(_postgres(target)) as db:
            name = before.cluster_user
            jobs = dict(db.execute("SELECT slurm_job_id, uuid FROM jobs_job WHERE cluster_user = %s", [name]))
            # Both jobs, the second under the portal id it had (slurmdbd kept its comment).
            assert jobs == {before.slurm_job_id: before.uuid, after.slurm_job_id: after.uuid}
            state = db.execute("SELECT state FROM jobs_job WHERE slurm_job_id = %s", [after.slurm_job_id]).fetchone()
            assert state == ("COMPLETED",)
            usage_sql = (
                "SELECT cluster, slurm_job_id, run_start, seconds, amount FROM billing_usagerecord "
                "WHERE user_id = (SELECT id FROM auth_user WHERE username = 'alice')"
            )
            restored_usage = _usage(db.execute(usage_sql).fetchall())
            assert restored_usage == original_usage  # the same runs, seconds and money
            charged = db.execute(
                "SELECT count(*) FROM billing_usagerecord WHERE charged_at IS NOT NULL AND invoice_id IS NOT NULL"
            ).fetchone()
            assert charged == (2,)

        since = json.loads((folder / MANIFEST).read_text())["created_at"]
        again = _manage("reconcile", "--since", since, database=target)
        assert again.returncode == 0, again.stderr
        assert "0 jobs given back their row" in again.stdout and "0 usage records written again" in again.stdout
        with psycopg.connect(_postgres(target)) as db:
            assert _usage(db.execute(usage_sql).fetchall()) == original_usage
            assert db.execute("SELECT count(*) FROM jobs_job WHERE cluster_user = %s", [name]).fetchone() == (2,)
    finally:
        _admin_sql(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')


@pytest.mark.django_db
def test_a_backup_that_does_not_match_or_a_database_in_use_is_refused(tmp_path):
    with pytest.raises(CommandError, match="not a backup folder"):
        call_command("restore", str(tmp_path))
    folder = tmp_path / "b"
    folder.mkdir()
    (folder / "database.pgdump").write_bytes(b"PGDMP not really")
    manifest = {
        "format": "gpupool-backup/1",
        "created_at": "2026-12-07T10:00:00+00:00",
        "database": "postgresql",
        "files": {"database.pgdump": {"bytes": 3, "sha256": "0" * 64}},
    }
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(CommandError, match="does not match its manifest"):
        call_command("restore", str(folder))
    from gpupool.backup import _digest

    manifest["files"]["database.pgdump"] = _digest(folder / "database.pgdump")
    (folder / MANIFEST).write_text(json.dumps(manifest))
    tables = len(connection.introspection.table_names())
    with pytest.raises(CommandError, match="database is not empty"):
        call_command("restore", str(folder))  # the test database is in use: never written over
    assert len(connection.introspection.table_names()) == tables
