"""manage.py backup DIR: the database and each cluster's sacctmgr dump, with a manifest (gpupool/backup.py)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from gpupool.backup import BackupError, backup


class Command(BaseCommand):
    help = "Write the portal's database dump and each cluster's sacctmgr dump, with checksums, into a new folder."

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path, help="A new (or empty) folder")

    def handle(self, *args, folder: Path, **options):
        try:
            result = backup(folder)
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        for name, figures in result.files.items():
            self.stdout.write(f"{name}: {figures['bytes']} bytes, sha256 {figures['sha256'][:16]}...")
        if result.errors:
            failed = ", ".join(f"{name} ({error})" for name, error in result.errors.items())
            raise CommandError(f"the database was dumped, but these clusters were not: {failed}")
        self.stdout.write(self.style.SUCCESS(f"backup written to {result.folder}"))
