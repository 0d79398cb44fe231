"""`{{ amount|usd }}`: the one way a page prints money (a builtin of every template).

Exact: an amount is never rounded for display, so a page and the invoice it summarises agree
to the last digit shown; trailing zeros are dropped but two places always stay ("$299.00",
"$2.70", "$0.864", "$0.0025"); thousands are grouped ("$12,000.00"); a negative amount reads
"-$5.00". Rounding to cents happens once, where money is charged (billing.pricing.to_cents),
never here. A value already formatted by the API's rule (a string) takes the same form; None
and "" print as a dash."""

from django import template

from foundation import money

register = template.Library()


@register.filter
def usd(amount) -> str:
    return money.usd(amount)
