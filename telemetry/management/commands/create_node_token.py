from django.core.management.base import BaseCommand

from telemetry.models import NodeToken


class Command(BaseCommand):
    help = "Create (or replace) the telemetry agent token of a node and print it once."

    def add_arguments(self, parser):
        parser.add_argument("node")

    def handle(self, *args, node, **options):
        self.stdout.write(NodeToken.issue(node))
