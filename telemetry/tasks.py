import logging
from concurrent.futures import ThreadPoolExecutor

from celery import shared_task
from django.conf import settings
from django.utils import timezone

from jobs.models import FINAL_STATES, Job
from telemetry.actions import storage
from telemetry.dcgm import scrape_exporter
from telemetry.drivers import record_drivers
from telemetry.efficiency import compute
from telemetry.emulator import emulated_further_samples, emulated_samples
from telemetry.models import JobEfficiency
from telemetry.prometheus import read_and_log

log = logging.getLogger(__name__)


@shared_task(ignore_result=True)
def emulate_telemetry() -> int:
    """Dev cluster only (TELEMETRY_EMULATOR=1): samples derived from real allocations."""
    if not settings.TELEMETRY_EMULATOR:
        return 0
    now = timezone.now()
    # Further clusters' GPUs (the other dev generation) are stored here whatever the source of
    # the portal's own: the dev stack's Prometheus scrapes the own cluster's nodes only.
    samples = emulated_further_samples(now)
    if not settings.PROMETHEUS_URL:
        # With a Prometheus, the dev stack serves the own cluster's emulated GPUs to it
        # (serve_emulated_dcgm), whose read stores them: storing them here too would write twice.
        own = emulated_samples(now)
        # The emulated GPUs have no driver: the version stated in settings, marked as the emulator's.
        record_drivers(
            {node: settings.TELEMETRY_EMULATOR_DRIVER for node in {s.node for s in own}}, source="emulator", now=now
        )
        samples += own
    return storage.store_samples(samples, source="emulator")


@shared_task(ignore_result=True)
def scrape_dcgm() -> int:
    """Read each configured DCGM exporter (DCGM_EXPORTER_URLS, node -> URL) for its own node only.

    Exporters are read in parallel, each within its byte and time caps, so one slow node delays
    the round by at most the cap; a dead exporter is logged and skipped. One bulk write for all.
    """
    exporters = settings.DCGM_EXPORTER_URLS
    if not exporters:
        return 0
    now = timezone.now()
    with ThreadPoolExecutor(max_workers=min(16, len(exporters)), thread_name_prefix="dcgm") as pool:
        scrapes = list(pool.map(lambda item: scrape_exporter(item[0], item[1], now), exporters.items()))
    record_drivers(
        {node: driver for node, (_, driver) in zip(exporters, scrapes, strict=True) if driver}, source="dcgm", now=now
    )
    return storage.store_samples([sample for samples, _ in scrapes for sample in samples], source="dcgm")


@shared_task(ignore_result=True)
def read_prometheus_telemetry() -> int:
    """One query to the site's Prometheus (PROMETHEUS_URL) for every GPU's DCGM fields, stored as
    any source's samples. Prometheus down: logged, nothing stored, the next read tries again."""
    if not settings.PROMETHEUS_URL:
        return 0
    now = timezone.now()
    read = read_and_log(settings.PROMETHEUS_URL, now, matchers=settings.PROMETHEUS_DCGM_MATCHERS)
    if read is None:
        return 0
    record_drivers(read.drivers, source="prometheus", now=now)
    return storage.store_samples(read.samples, source="prometheus")


@shared_task(ignore_result=True)
def roll_up_telemetry() -> dict:
    return storage.roll_up()


@shared_task(ignore_result=True)
def compute_job_efficiency(job_id: int) -> None:
    job = Job.objects.filter(pk=job_id).first()
    if job is not None:
        compute(job)


@shared_task(ignore_result=True)
def compute_missed_efficiencies() -> int:
    """Ended jobs of the minute roll-ups' reach without figures (a lost message, a stopped worker)."""
    since = timezone.now() - settings.TELEMETRY_MINUTE_RETENTION
    missed = (
        Job.objects.filter(state__in=FINAL_STATES, end_time__gte=since)
        .exclude(gpu_allocation={})
        .exclude(pk__in=JobEfficiency.objects.values("job_id"))
        .order_by("end_time")[:500]
    )
    return sum(compute(job) is not None for job in missed)
