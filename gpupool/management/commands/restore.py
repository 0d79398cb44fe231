"""manage.py restore DIR: a backup into an empty database, migrated, then reconciled from Slurm's
accounting (gpupool/restore.py, gpupool/reconcile.py)."""

from datetime import timedelta
from pathlib import Path

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError

from gpupool.reconcile import reconcile
from gpupool.restore import RestoreError, backed_up_at, restore

# Jobs submitted while the dump ran may be in it or not: the reconcile starts a little before.
MARGIN = timedelta(minutes=10)


class Command(BaseCommand):
    help = "Restore a backup folder into an empty database, migrate it, and re-derive from Slurm what happened since."

    def add_arguments(self, parser):
        parser.add_argument("folder", type=Path, help="A folder `manage.py backup` wrote")
        parser.add_argument(
            "--no-reconcile", action="store_true", help="Restore and migrate only (run `reconcile` yourself later)"
        )

    def handle(self, *args, folder: Path, no_reconcile: bool, **options):
        try:
            manifest = restore(folder)
        except RestoreError as exc:
            raise CommandError(str(exc)) from None
        since = backed_up_at(manifest)
        self.stdout.write(f"restored the database backed up at {since:%Y-%m-%d %H:%M:%S %Z}")
        call_command("migrate", interactive=False, verbosity=0)
        self.stdout.write("migrated to this release")
        if no_reconcile:
            return
        result = reconcile(since - MARGIN)
        self.stdout.write(result.summary())
        if not result.ok:
            raise CommandError(
                "the database is restored, but some clusters could not be reconciled: run "
                f"`manage.py reconcile --since {(since - MARGIN).isoformat()}` once they answer"
            )
        self.stdout.write(self.style.SUCCESS("restored and reconciled"))
