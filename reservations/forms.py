"""The request form's fields read into `actions.RequestData`, with each unreadable field named,
so the page shows every error at once and the rules themselves stay in `actions.validate`.

The start arrives as the wall-clock date and time the user typed plus the IANA zone their
browser is in (UTC without script); it leaves here as a UTC-aware datetime."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings

from reservations.actions import RequestData

# The fields the template shows errors under; anything else goes to the form's top.
FIELDS = ("gpu_type", "gpu_count", "start", "duration_minutes", "purpose", "members")


def local_start(day: str, clock: str, zone: str) -> datetime:
    """The UTC moment of a wall-clock `day` `clock` in `zone`; ValueError when unreadable."""
    try:
        tz = ZoneInfo(zone or "UTC")
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"Unknown time zone {zone!r}.") from exc
    moment = datetime.combine(date.fromisoformat(day), time.fromisoformat(clock), tzinfo=tz)
    return moment.astimezone(UTC)


def parse_start(text: str) -> datetime:
    """An ISO 8601 moment with its offset (what the page's script sends), as UTC."""
    moment = datetime.fromisoformat(text.strip())
    if moment.tzinfo is None:
        raise ValueError("Give the time zone.")
    return moment.astimezone(UTC)


def _integer(text: str) -> int:
    text = (text or "").strip()
    if not text.isdigit():
        raise ValueError
    return int(text)


def request_data(post, *, placeholder_start: datetime) -> tuple[RequestData, dict[str, list[str]]]:
    """The data and field -> messages for what the form could not even read. An unreadable
    field is replaced by a harmless placeholder, so the caller can still check the rest with
    `actions.validate` and show every error at once; with errors the data is never sent."""
    errors: dict[str, list[str]] = {}
    try:
        count = _integer(post.get("gpu_count"))
    except ValueError:
        errors["gpu_count"] = ["A whole number of GPUs."]
        count = 1
    try:
        duration = _integer(post.get("duration_minutes"))
    except ValueError:
        errors["duration_minutes"] = ["A whole number of minutes."]
        duration = settings.RESERVATION_GRID_MINUTES
    try:
        start = local_start(post.get("start_date", ""), post.get("start_time", ""), post.get("tz", "UTC"))
    except ValueError as exc:
        message = str(exc) if "time zone" in str(exc) else "Give a date and a time (e.g. 2026-12-07 and 10:00)."
        errors["start"] = [message]
        start = placeholder_start
    members = tuple(name for name in re.split(r"[\s,;]+", post.get("members", "")) if name)
    data = RequestData(
        gpu_type=post.get("gpu_type", ""),
        gpu_count=count,
        start=start,
        duration_minutes=duration,
        purpose=post.get("purpose", ""),
        member_usernames=members,
    )
    return data, errors
