import json

from django.core.management.base import BaseCommand

from jobs.tasks import run_sync


class Command(BaseCommand):
    help = "Run one pass of the cluster mirror (what the beat task runs every few seconds)."

    def handle(self, *args, **options):
        self.stdout.write(json.dumps(run_sync(), default=str))
