import logging

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from telemetry import storage

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def emulate_telemetry() -> int:
    """Dev cluster only (TELEMETRY_EMULATOR=1): samples derived from real allocations."""
    if not settings.TELEMETRY_EMULATOR:
        return 0
    from telemetry.emulator import emulated_samples

    return storage.store_samples(emulated_samples(timezone.now()), source="emulator")


@shared_task(ignore_result=True)
def scrape_dcgm() -> int:
    """Read each configured DCGM exporter; a dead exporter is logged and skipped."""
    if not settings.DCGM_EXPORTER_URLS:
        return 0
    from telemetry.dcgm import fetch_dcgm, parse_dcgm_metrics

    stored = 0
    for url in settings.DCGM_EXPORTER_URLS:
        try:
            samples = parse_dcgm_metrics(fetch_dcgm(url), now=timezone.now())
        except Exception as exc:  # one exporter down must not stop the others
            log.warning("DCGM exporter %s: %s", url, exc)
            continue
        stored += storage.store_samples(samples, source="dcgm")
    return stored


@shared_task(ignore_result=True)
def roll_up_telemetry() -> dict:
    return storage.roll_up()
