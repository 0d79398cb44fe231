"""Spot prices by time of day: a spot run pays a share of its GPU type's price that depends on
when each of its seconds fell, "night" (22:00 to 06:00) or "day" (the rest), in the billing
zone (plans.models.billing_zone: the zone of billing days and months). The shares are rows of
the rate card in force at the run's start (plans.rate_cards.RateCardSpotMultiplier), dated and
frozen like every price; a window without a row pays the full price.

Seconds are whole (slurmdbd's), so a run's seconds split between windows add up to its
elapsed seconds exactly; money is computed from them in billing/actions/charging.py."""

from __future__ import annotations

from datetime import datetime, time, timedelta

from plans.models import billing_zone

NIGHT, DAY = "night", "day"
NIGHT_STARTS = time(22)
NIGHT_ENDS = time(6)


def window_at(moment: datetime) -> str:
    local = moment.astimezone(billing_zone()).time()
    return NIGHT if local >= NIGHT_STARTS or local < NIGHT_ENDS else DAY


def _next_boundary(moment: datetime) -> datetime:
    zone = billing_zone()
    local = moment.astimezone(zone)
    for day in (local.date(), local.date() + timedelta(days=1)):
        for clock in (NIGHT_ENDS, NIGHT_STARTS):
            boundary = datetime.combine(day, clock, tzinfo=zone)
            if boundary > local:
                return boundary
    raise AssertionError("unreachable: a boundary comes within a day")


def seconds_by_window(start: datetime, end: datetime) -> dict[str, int]:
    """{"night": s, "day": s} of [start, end); both add up to the whole seconds between them."""
    if start.tzinfo is None or end.tzinfo is None:
        raise ValueError("spot windows need aware times")
    found = {NIGHT: 0, DAY: 0}
    cursor = start
    while cursor < end:
        step_end = min(_next_boundary(cursor), end)
        found[window_at(cursor)] += int((step_end - cursor).total_seconds())
        cursor = step_end
    return found
