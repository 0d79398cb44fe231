"""The dev cluster's GPU load emulator (telemetry/emulator.py) served as one DCGM exporter per
node, for the dev stack's Prometheus (telemetry/exporter_server.py). Never in production: real
nodes run NVIDIA's dcgm-exporter."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections
from django.utils import timezone

from cluster.models import Node
from telemetry.emulator import emulated_samples
from telemetry.exporter_server import exporter_server, scrape_config


class Command(BaseCommand):
    help = "Serve the emulated GPUs as DCGM exporters (GET /nodes/<node>/metrics); dev clusters only."

    def add_arguments(self, parser):
        parser.add_argument("--bind", default="127.0.0.1:9400", help="host:port to listen on")
        parser.add_argument("--prometheus-config", help="write a prometheus.yml scraping every node here, then serve")
        parser.add_argument("--interval", default="15s", help="the scrape interval written into that config")

    def handle(self, *args, bind: str, prometheus_config: str | None, interval: str, **options):
        if not settings.TELEMETRY_EMULATOR:
            raise CommandError("TELEMETRY_EMULATOR is off: the emulator is for dev clusters only")
        host, _, port = bind.rpartition(":")
        if prometheus_config:
            nodes = sorted(Node.objects.values_list("name", flat=True))
            if not nodes:
                raise CommandError("no nodes mirrored yet: run the portal (make dev) once, then this")
            Path(prometheus_config).write_text(scrape_config(nodes, bind, interval=interval))
            self.stdout.write(f"wrote {prometheus_config} for {len(nodes)} nodes")
        models = {
            node.name: settings.GPU_TYPES.get(node.gpus[0]["type"], {}).get("label", "") if node.gpus else ""
            for node in Node.objects.all()
        }

        def samples_of(node: str):
            close_old_connections()  # each scrape is its own thread: no connection left to go stale
            return [sample for sample in emulated_samples(timezone.now()) if sample.node == node]

        server = exporter_server(
            (host, int(port)), samples_of, models=models, driver=settings.TELEMETRY_EMULATOR_DRIVER
        )
        self.stdout.write(f"emulated DCGM exporters on http://{bind}/nodes/<node>/metrics (the emulator, not GPUs)")
        try:
            server.serve_forever()
        finally:
            server.server_close()
