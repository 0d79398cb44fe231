"""Compare the limits Slurm enforces with the portal's plans, and fix the difference.

manage.py slurm_limits --check   print the drift; exit 1 when there is any
manage.py slurm_limits --sync    write the plans' QOS and every subscriber's association
manage.py slurm_limits --noop    print the sacctmgr commands --sync would run
"""

from django.core.management.base import BaseCommand, CommandError

from cluster.errors import SlurmError
from plans import enforcement


class Command(BaseCommand):
    help = "Show or fix the drift between the portal's plans and the limits in slurmdbd."

    def add_arguments(self, parser):
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("--check", action="store_true", help="report differences; exit 1 if any")
        mode.add_argument("--sync", action="store_true", help="write the plans' limits into slurmdbd")
        mode.add_argument("--noop", action="store_true", help="print the commands --sync would run")

    def handle(self, *args, check=False, sync=False, noop=False, **options):
        try:
            if check:
                drift = enforcement.drift()
                for line in drift:
                    self.stdout.write(line)
                if drift:
                    raise CommandError(f"{len(drift)} difference(s) between the plans and slurmdbd")
                self.stdout.write("slurmdbd enforces the plans as they are")
                return
            commands = enforcement.sync(noop=noop)
        except SlurmError as exc:
            raise CommandError(f"Slurm: {exc.message}") from exc
        for command in commands:
            self.stdout.write(" ".join(command))
        if sync:
            left = enforcement.drift()
            if left:
                raise CommandError("still different after the sync:\n" + "\n".join(left))
            self.stdout.write(f"synced: {len(commands)} command(s)")
