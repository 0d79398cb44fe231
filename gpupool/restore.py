"""`manage.py restore DIR`: a backup (gpupool/backup.py) into an empty database, checked first.

The folder must hold a manifest of this format whose every file still matches its size and sha256;
the database named by DATABASE_URL must be of the backup's engine and hold no table (a restore never
writes over a database in use). PostgreSQL's dump goes in through `pg_restore` in one transaction
(nothing half-restored), SQLite's file through SQLite's backup API. Each cluster's `sacctmgr dump`
is not loaded: Slurm's own accounts outlive the portal's database, and `sacctmgr load FILE` is the
admin's to run when slurmdbd's database was lost too (docs/operations.md). The command then migrates
and reconciles from Slurm's accounting (gpupool/reconcile.py).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
from datetime import datetime
from pathlib import Path

from django.conf import settings
from django.db import connection

from gpupool.backup import FORMAT, MANIFEST, postgres_client, verify


class RestoreError(Exception):
    """Why nothing was restored, in words."""


def read_manifest(folder: Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.is_file():
        raise RestoreError(f"{folder} holds no {MANIFEST}: not a backup folder")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise RestoreError(f"{MANIFEST} cannot be read: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise RestoreError(f"{MANIFEST} is not a {FORMAT} manifest")
    return manifest


def backed_up_at(manifest: dict) -> datetime:
    return datetime.fromisoformat(manifest["created_at"])


def restore(folder: Path) -> dict:
    """Check the backup and the target, then restore the database. Returns the manifest."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    problems = verify(folder)
    if problems:
        raise RestoreError("the backup does not match its manifest: " + "; ".join(problems))
    if manifest.get("database") != connection.vendor:
        raise RestoreError(
            f"the backup is of a {manifest.get('database')} database; DATABASE_URL names {connection.vendor}"
        )
    tables = connection.introspection.table_names()
    if tables:
        raise RestoreError(
            f"the database is not empty ({len(tables)} tables): restore into a new, empty database and point "
            "DATABASE_URL at it"
        )
    if connection.vendor == "sqlite":
        _restore_sqlite(folder / "database.sqlite3")
    else:
        _restore_postgresql(folder / "database.pgdump")
    connection.close()  # the next query sees the restored tables
    return manifest


def _restore_sqlite(source: Path) -> None:
    connection.close()
    with sqlite3.connect(source) as backup, sqlite3.connect(settings.DATABASES["default"]["NAME"]) as target:
        backup.backup(target)


def _restore_postgresql(dump: Path) -> None:
    connect, env = postgres_client(settings.DATABASES["default"])
    argv = ["pg_restore", "--no-owner", "--no-privileges", "--exit-on-error", "--single-transaction", *connect]
    argv.append(str(dump))
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise RestoreError(f"pg_restore failed (nothing was restored): {done.stderr.strip()[:500]}")
