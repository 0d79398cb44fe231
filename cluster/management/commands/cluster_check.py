from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from cluster.clusters.services import rest_client, served_api
from cluster.errors import SlurmAuthError, SlurmError


def format_gpus(node) -> str:
    return ", ".join(f"{g.gpu_type}:{g.count} ({g.used} used)" for g in node.gpus) or "no GPUs"


class Command(BaseCommand):
    help = "Check that slurmrestd answers and accepts our token; list nodes, states and GPUs by type."

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Slurm user to act as (default: SLURM_SERVICE_USER)")

    def handle(self, *args, user=None, **options):
        client = rest_client(user)
        try:
            nodes = client.check_access()
        except SlurmAuthError as exc:
            raise CommandError(f"slurmrestd at {settings.SLURMRESTD_URL} rejected the token: {exc}") from exc
        except SlurmError as exc:
            raise CommandError(f"slurmrestd at {settings.SLURMRESTD_URL} cannot be used: {exc}") from exc
        served = served_api()  # read once by the first call above; cached for the process
        self.stdout.write(f"slurmrestd {settings.SLURMRESTD_URL} as {client.user_name}: OK")
        self.stdout.write(
            f"Slurm {served.release or '(release not reported)'}; API versions served: {', '.join(served.versions)}; "
            f"in use: {client.adapter.version} (SLURM_API_VERSION={settings.SLURM_API_VERSION})"
        )
        width = max((len(node.name) for node in nodes), default=4)
        self.stdout.write(f"{'NODE'.ljust(width)}  {'STATE':<22}  GPUS")
        by_type: dict[str, list[int]] = {}
        for node in nodes:
            state = "+".join(node.states) + (f" ({node.reason})" if node.reason else "")
            self.stdout.write(f"{node.name.ljust(width)}  {state:<22}  {format_gpus(node)}")
            for group in node.gpus:
                total = by_type.setdefault(group.gpu_type, [0, 0])
                total[0] += group.count
                total[1] += group.used
        summary = ", ".join(f"{kind}: {used}/{count} in use" for kind, (count, used) in sorted(by_type.items()))
        self.stdout.write(f"{len(nodes)} nodes; GPUs by type: {summary or 'none'}")
