"""manage.py backup DIR: a database dump and each cluster's sacctmgr dump (from the real cluster),
with a manifest whose checksums a restore checks; a folder in use is refused; a cluster that does
not answer leaves the rest written and the command failing with its name."""

import json

import pytest
from django.core.management import CommandError, call_command

from gpupool.backup import MANIFEST, verify

pytestmark = pytest.mark.django_db


@pytest.mark.slurm
def test_a_backup_holds_the_database_and_the_clusters_accounts_with_checksums(tmp_path, settings, capsys):
    folder = tmp_path / "backup"
    call_command("backup", str(folder))
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["database"] == "postgresql" and manifest["errors"] == {}
    assert manifest["migrations"]["failures"].startswith("0001")
    dump = folder / "database.pgdump"
    assert dump.read_bytes()[:5] == b"PGDMP" and manifest["files"]["database.pgdump"]["bytes"] > 10_000
    (cluster,) = manifest["clusters"].values()
    accounts = (folder / cluster["file"]).read_text()
    assert f"Cluster - '{cluster['slurm_cluster']}'" in accounts and "Account - 'portal'" in accounts
    assert verify(folder) == []
    assert "backup written to" in capsys.readouterr().out
    with (folder / cluster["file"]).open("a") as edited:
        edited.write("User - 'mallory'\n")
    assert verify(folder) == [f"{cluster['file']} is not the file the backup wrote"]


def test_a_folder_in_use_is_refused_and_nothing_is_written(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(CommandError, match="not empty"):
        call_command("backup", str(tmp_path))
    assert [path.name for path in tmp_path.iterdir()] == ["notes.txt"]


def test_a_cluster_that_does_not_answer_leaves_the_database_dumped_and_says_which(tmp_path, settings):
    settings.SLURM_CLI_PREFIX = ["false"]  # every command fails, as a cluster that is down does
    folder = tmp_path / "backup"
    with pytest.raises(CommandError, match=f"these clusters were not: {settings.SLURM_CLUSTER_NAME}"):
        call_command("backup", str(folder))
    manifest = json.loads((folder / MANIFEST).read_text())
    assert list(manifest["files"]) == ["database.pgdump"] and settings.SLURM_CLUSTER_NAME in manifest["errors"]
    assert verify(folder) == []
