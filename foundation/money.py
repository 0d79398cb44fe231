"""How money is written and rounded, for every layer: the API's decimal strings, the pages'
dollars, and the one rounding to the cent (the rule is written down in billing/pricing.py).
`Decimal` only; a float is refused (0.1 + 0.2 is not money)."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")


def to_cents(amount: Decimal) -> Decimal:
    """The invoice rounding: half-up to the cent (0.005 -> 0.01, -0.005 -> -0.01)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def format_amount(amount: Decimal) -> str:
    """A money amount as the API writes it: exact, trailing zeros dropped but at least two
    places ("2.70", "0.864", "5.00", "8.564")."""
    if isinstance(amount, float):
        raise TypeError("money is a Decimal, not a float")
    whole, _, places = format(amount.normalize(), "f").partition(".")
    return f"{whole}.{places.ljust(2, '0')}"


def usd(amount) -> str:
    """A money amount as a page prints it: exact like `format_amount`, thousands grouped, a
    dollar sign ("$12,000.00", "$0.864", "-$5.00"). A value the API already formatted (a
    string) takes the same form; None and "" print as a dash; anything else as it is."""
    if amount is None or amount == "":
        return "—"
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        return str(amount)
    if not value.is_finite():
        return str(amount)
    sign = "-" if value < 0 else ""
    whole, _, places = format_amount(abs(value)).partition(".")
    return f"{sign}${int(whole):,}.{places}"
