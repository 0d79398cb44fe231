"""Drift between the portal's reservations and Slurm's.

manage.py reservations_check           list it; exit 1 when there is any
manage.py reservations_check --sync    repair what the portal owns
manage.py reservations_check --noop    print the scontrol commands --sync would run
"""

from django.core.management.base import BaseCommand, CommandError

from cluster.errors import SlurmError
from reservations import reconcile


class Command(BaseCommand):
    help = "Compare the portal's reservations with Slurm's; --sync repairs, --noop shows the commands."

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group()
        mode.add_argument("--sync", action="store_true")
        mode.add_argument("--noop", action="store_true")

    def handle(self, *args, sync=False, noop=False, **options):
        try:
            drift = reconcile.check()
            for item in drift:
                self.stdout.write(str(item))
            if sync or noop:
                for command in reconcile.repair(drift, noop=noop):
                    self.stdout.write(" ".join(command))
                if sync and reconcile.check():
                    raise CommandError("still different after the repair")
                return
        except SlurmError as exc:
            raise CommandError(f"Slurm: {exc.message}") from exc
        if drift:
            raise CommandError(f"{len(drift)} difference(s) between the portal and Slurm")
        self.stdout.write("the portal and Slurm agree")
