"""How money is written and rounded, for every layer: the API's decimal strings (exact), the
pages' dollars (to the cent, the exact figure on hover), unit prices (exact, with the currency),
and the one rounding to the cent (the rule is written down in billing/pricing.py). `Decimal`
only; a float is refused (0.1 + 0.2 is not money)."""

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


def as_decimal(amount) -> Decimal | None:
    """`amount` (a Decimal, an int, or the API's text form) as a finite Decimal; None otherwise."""
    if isinstance(amount, float):
        raise TypeError("money is a Decimal, not a float")
    try:
        value = Decimal(str(amount))
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def usd_exact(amount) -> str:
    """A money amount exactly as the API has it, with a dollar sign: trailing zeros dropped but
    two places kept, thousands grouped ("$12,000.00", "$0.864", "$0.0025", "-$5.00"). For unit
    prices ("$0.0025" a GPU-second) and for the exact figure behind a rounded one. A value the
    API already formatted (a string) takes the same form; None and "" print as a dash; anything
    else as it is."""
    if amount is None or amount == "":
        return "—"
    value = as_decimal(amount)
    if value is None:
        return str(amount)
    sign = "-" if value < 0 else ""
    whole, _, places = format_amount(abs(value)).partition(".")
    return f"{sign}${int(whole):,}.{places}"


def usd(amount) -> str:
    """A money amount as a page prints it: to the cent, half-up (the invoice rounding), thousands
    grouped ("$8.56" for $8.564, "$12,000.00", "-$5.00"); an amount under half a cent but not
    zero reads "< $0.01" (a few seconds of a GPU are not free). The exact figure is `usd_exact`'s
    (the page filter puts it on hover; the API has it). None and "" print as a dash."""
    if amount is None or amount == "":
        return "—"
    value = as_decimal(amount)
    if value is None:
        return str(amount)
    if value and abs(value) < CENT / 2:
        return "< $0.01" if value > 0 else "> -$0.01"
    return usd_exact(to_cents(value))
