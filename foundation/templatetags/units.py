"""`{{ seconds|hours }}`: GPU-seconds (or any seconds) as hours to two places, "7,200" -> "2.00",
the unit the usage page and the plans speak in; `{{ span|duration }}`: a length of time in words
("2 hours", "2 days", "1 day 6 hours", "90 seconds"), never Python's "2 days, 0:00:00". Both are
builtins of every template."""

from datetime import timedelta
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django import template

register = template.Library()


@register.filter
def hours(seconds) -> str:
    try:
        value = Decimal(str(seconds)) / 3600
    except (InvalidOperation, TypeError):
        return ""
    return f"{value.quantize(Decimal('0.01'), rounding=ROUND_HALF_UP):,}"


_UNITS = (("day", 86400), ("hour", 3600), ("minute", 60), ("second", 1))


@register.filter
def duration(span) -> str:
    """A timedelta or a number of seconds, in its two largest whole units."""
    if isinstance(span, timedelta):
        seconds = int(span.total_seconds())
    else:
        try:
            seconds = int(Decimal(str(span)))
        except (InvalidOperation, TypeError, ValueError):
            return ""
    if seconds <= 0:
        return "0 seconds"
    words = []
    for name, size in _UNITS:
        count, seconds = divmod(seconds, size)
        if count:
            words.append(f"{count:,} {name}{'' if count == 1 else 's'}")
        if len(words) == 2 or (words and not count):
            break
    return " ".join(words)
