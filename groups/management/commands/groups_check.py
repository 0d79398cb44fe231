"""Compare every group with what Slurm holds; `--sync` makes Slurm hold what the rows say.

python manage.py groups_check [--sync]
"""

from django.core.management.base import BaseCommand

from cluster.errors import SlurmError
from groups.models import Group
from groups.tasks import differences, write_group


class Command(BaseCommand):
    help = __doc__.splitlines()[0]

    def add_arguments(self, parser):
        parser.add_argument("--sync", action="store_true", help="repair what differs")

    def handle(self, *args, sync=False, **options):
        drift = 0
        for group in Group.objects.order_by("slug"):
            try:
                found = differences(group)
                if found and sync:
                    found = [f"{change} (repaired)" for change in write_group(group)] or found
            except SlurmError as exc:
                self.stderr.write(f"{group.slug}: Slurm did not answer: {exc}")
                drift += 1
                continue
            drift += bool(found)
            for line in found:
                self.stdout.write(f"{group.slug}: {line}")
        self.stdout.write(f"{Group.objects.count()} groups, {drift} differ from Slurm")
        if drift and not sync:
            raise SystemExit(1)
