"""manage.py reconcile --since ISO: re-derive from Slurm's accounting the jobs, usage and charges since
a moment (after a restore; gpupool/reconcile.py). Idempotent: run it again and nothing doubles."""

from datetime import datetime

from django.core.management.base import BaseCommand, CommandError
from django.utils import timezone

from gpupool.reconcile import reconcile


def _moment(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise CommandError(f"--since takes a date and time (ISO 8601), not {text!r}") from None
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


class Command(BaseCommand):
    help = "Re-derive from each cluster's accounting the jobs, usage and charges since a moment."

    def add_arguments(self, parser):
        parser.add_argument("--since", required=True, type=_moment, help="From when (ISO 8601, e.g. 2026-12-07T10:00)")

    def handle(self, *args, since: datetime, **options):
        if since > timezone.now():
            raise CommandError("--since is in the future")
        result = reconcile(since)
        self.stdout.write(result.summary())
        if not result.ok:
            raise CommandError("some clusters could not be reconciled; run it again once they answer")
