"""`{{ seconds|hours }}`: GPU-seconds (or any seconds) as hours to two places, "7,200" -> "2.00",
the unit the usage page and the plans speak in (a builtin of every template)."""

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
