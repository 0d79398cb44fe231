"""`manage.py backup DIR`: what a restore needs, in one folder with a manifest.

- the portal's database: `pg_dump --format=custom` for PostgreSQL (restored with `pg_restore`), the
  SQLite file copied through SQLite's own backup API (consistent while the portal writes);
- each cluster's `sacctmgr dump` (accounts, users, associations, limits; `sacctmgr load` takes it back),
  through that cluster's command prefix, never a shell;
- manifest.json: when, which database engine, the migrations applied, and every file's size and
  sha256, so a restore checks what it reads before it trusts it.

A cluster that does not answer does not stop the others or the database dump: the manifest records
its error and the command exits non-zero, naming it.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.utils import timezone

from cluster.clusters.registry import all_clusters
from cluster.clusters.services import slurm_cli
from cluster.errors import SlurmCommandError, SlurmTransientError

MANIFEST = "manifest.json"
FORMAT = "gpupool-backup/1"


class BackupError(Exception):
    """Why nothing was written (the folder), in words."""


@dataclass
class BackupResult:
    folder: Path
    files: dict[str, dict] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def _digest(path: Path) -> dict:
    sha = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            sha.update(chunk)
    return {"bytes": path.stat().st_size, "sha256": sha.hexdigest()}


def postgres_client(database: dict) -> tuple[list[str], dict[str, str]]:
    """The connection arguments and environment of pg_dump and pg_restore (gpupool/restore.py) for
    a DATABASES entry: the password in the environment, never on the command line."""
    arguments = [
        f"--host={database.get('HOST') or 'localhost'}", f"--port={database.get('PORT') or 5432}",
        f"--username={database.get('USER') or 'postgres'}", f"--dbname={database['NAME']}",
    ]  # fmt: skip
    return arguments, {**os.environ, "PGPASSWORD": database.get("PASSWORD") or ""}


def _dump_database(folder: Path) -> str:
    database = settings.DATABASES["default"]
    if connection.vendor == "sqlite":
        target = folder / "database.sqlite3"
        with sqlite3.connect(database["NAME"]) as source, sqlite3.connect(target) as copy:
            source.backup(copy)
        return target.name
    if connection.vendor != "postgresql":
        raise BackupError(f"no dump for a {connection.vendor} database")
    target = folder / "database.pgdump"
    connect, env = postgres_client(database)
    argv = ["pg_dump", "--format=custom", "--no-owner", f"--file={target}", *connect]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=3600, check=False)
    if done.returncode != 0:
        raise BackupError(f"pg_dump failed: {done.stderr.strip()[:500]}")
    return target.name


def _migrations() -> dict[str, str]:
    latest: dict[str, str] = {}
    for app, name in MigrationRecorder(connection).applied_migrations():
        latest[app] = max(latest.get(app, ""), name)
    return dict(sorted(latest.items()))


def backup(folder: Path) -> BackupResult:
    folder = Path(folder)
    if folder.exists() and any(folder.iterdir()):
        raise BackupError(f"{folder} is not empty: a backup goes into a new folder")
    folder.mkdir(parents=True, exist_ok=True)
    result = BackupResult(folder)
    names = [_dump_database(folder)]
    clusters = {}
    for cluster in all_clusters():
        try:
            cli = slurm_cli(cluster.name if not cluster.primary else None)
            slurm_name = cli.cluster_name()
            target = folder / f"sacctmgr-{cluster.name}.cfg"
            target.write_text(cli.dump_associations(slurm_name), encoding="utf-8")
        except (SlurmCommandError, SlurmTransientError, OSError) as exc:
            result.errors[cluster.name] = str(exc)[:500]
            continue
        names.append(target.name)
        clusters[cluster.name] = {"slurm_cluster": slurm_name, "file": target.name}
    result.files = {name: _digest(folder / name) for name in names}
    manifest = {
        "format": FORMAT,
        "created_at": timezone.now().isoformat(),
        "database": connection.vendor,
        "migrations": _migrations(),
        "clusters": clusters,
        "errors": result.errors,
        "files": result.files,
    }
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return result


def verify(folder: Path) -> list[str]:
    """What does not match the manifest (missing files, other sizes or digests); empty when all does."""
    manifest = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
    problems = []
    for name, expected in manifest["files"].items():
        path = Path(folder) / name
        if not path.is_file():
            problems.append(f"{name} is missing")
        elif _digest(path) != expected:
            problems.append(f"{name} is not the file the backup wrote")
    return problems
