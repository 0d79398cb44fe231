"""Dates in one format, in the reader's zone: the browser's `tz` cookie when Python knows the
zone; anything else (missing, unknown, overlong, a path) renders in the portal's zone."""

from datetime import UTC, datetime

import pytest
from django.test import Client

from jobs.models import Job

pytestmark = pytest.mark.django_db

STARTED = datetime(2026, 12, 7, 22, 30, tzinfo=UTC)


def _page(user, cookie: str | None) -> str:
    browser = Client()
    browser.force_login(user)
    if cookie is not None:
        browser.cookies["tz"] = cookie
    return browser.get("/jobs/").content.decode()


def test_a_job_time_is_written_in_the_readers_zone_with_a_24_hour_clock(alice):
    Job.objects.create(owner=alice, name="late", slurm_job_id=5, state="RUNNING", start_time=STARTED)
    berlin = _page(alice, "Europe/Berlin")
    assert "7 Dec 2026, 23:30" in berlin and "Times are in Europe/Berlin" in berlin
    tokyo = _page(alice, "Asia/Tokyo")
    assert "8 Dec 2026, 07:30" in tokyo  # the next day there
    assert "p.m." not in berlin and "2026-12-07" not in berlin


@pytest.mark.parametrize("cookie", [None, "", "Not/AZone", "../../etc/passwd", "Europe/" + "x" * 80, "UTC; rm -rf"])
def test_a_missing_or_bad_zone_falls_back_to_the_portals(alice, cookie):
    Job.objects.create(owner=alice, name="late", slurm_job_id=5, state="RUNNING", start_time=STARTED)
    page = _page(alice, cookie)
    assert "7 Dec 2026, 22:30" in page and "Times are in UTC" in page
