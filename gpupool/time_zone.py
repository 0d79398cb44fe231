"""Times in the reader's time zone: the browser names its zone in the `tz` cookie
(static/js/dates.js sets it), and each request renders dates in that zone when it is a zone
Python knows; otherwise in TIME_ZONE. Only rendering follows it: the portal stores and
computes in UTC, and forms that take a time say which zone they read it in."""

from __future__ import annotations

from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.utils import timezone

COOKIE = "tz"
MAX_NAME = 64  # the longest IANA names are about 30 characters


@lru_cache(maxsize=512)
def _zone(name: str) -> ZoneInfo | None:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        return None


def zone_from_cookie(value: str | None) -> ZoneInfo | None:
    """The zone a cookie names, or None for a missing, overlong or unknown name (a path such as
    "../../etc/passwd" is refused by ZoneInfo itself)."""
    if not value or len(value) > MAX_NAME or not all(c.isalnum() or c in "/_+-" for c in value):
        return None
    return _zone(value)


class ReaderTimeZoneMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        zone = zone_from_cookie(request.COOKIES.get(COOKIE))
        if zone is None:
            timezone.deactivate()
        else:
            timezone.activate(zone)
        try:
            return self.get_response(request)
        finally:
            timezone.deactivate()
