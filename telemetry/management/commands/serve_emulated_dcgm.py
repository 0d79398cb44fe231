"""The dev cluster's GPU load emulator (telemetry/emulator.py) served as one DCGM exporter per
node, for the dev stack's Prometheus (telemetry/exporter_server.py). Never in production: real
nodes run NVIDIA's dcgm-exporter."""

from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import close_old_connections
from django.utils import timezone

from foundation.gpu_types import load_gpu_types
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
        # The dev cluster's nodes as the GPU types file lays them out (the mirror may be empty yet).
        catalog = load_gpu_types(settings.GPU_TYPES_FILE)
        if prometheus_config:
            nodes = [node.name for node in catalog.dev_nodes]
            Path(prometheus_config).write_text(scrape_config(nodes, bind, interval=interval))
            self.stdout.write(f"wrote {prometheus_config} for {len(nodes)} nodes")
        models = {node.name: catalog.types[node.gpu_type].label for node in catalog.dev_nodes}

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
