"""The one way a page prints money (builtins of every template):

- `{{ amount|usd }}`: to the cent, half-up, as an invoice rounds; an amount under half a cent
  reads "< $0.01". Where the rounding hides digits the exact figure is on hover (the `title`) and
  in `data-exact` ("$8.56" over "$8.564"), so a page and the invoice it summarises agree to the
  cent and nothing is lost. None and "" print as a dash.
- `{{ price|unit_price }}`: a price per unit, exact with its currency ("$0.0025"): a unit price
  rounded to the cent would be $0.00.
- `{{ quantity|quantity }}`: a quantity to sensible places: whole numbers grouped ("1,800"),
  fractions to at most three places ("250", "0.839"), the exact figure on hover."""

from decimal import ROUND_HALF_UP, Decimal

from django import template
from django.utils.html import format_html

from foundation import money

register = template.Library()
QUANTITY_PLACES = Decimal("0.001")


@register.filter
def usd(amount):
    shown = money.usd(amount)
    exact = money.usd_exact(amount)
    if shown == exact or shown == "—":
        return shown
    return format_html('<span title="{} exactly" data-exact="{}">{}</span>', exact, exact, shown)


@register.filter
def unit_price(amount) -> str:
    return money.usd_exact(amount)


@register.filter
def quantity(value):
    if value is None or value == "":
        return "—"
    number = money.as_decimal(value)
    if number is None:
        return str(value)
    if number == number.to_integral_value():
        return f"{int(number):,}"
    shown = number.quantize(QUANTITY_PLACES, rounding=ROUND_HALF_UP).normalize()
    text = f"{shown:,f}"
    exact = format(number.normalize(), "f")
    return text if text.replace(",", "") == exact else format_html('<span title="{}">{}</span>', exact, text)
