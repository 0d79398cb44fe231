"""`|usd`, the one way pages print money (foundation/templatetags/money.py)."""

from decimal import Decimal

import pytest
from django.template import Context, Template

from foundation.money import format_amount, to_cents
from foundation.templatetags.money import usd


@pytest.mark.parametrize(
    "amount, shown",
    [
        (Decimal("299"), "$299.00"),  # SQLite hands back a whole price without its cents
        (Decimal("299.00"), "$299.00"),
        (Decimal("2.7"), "$2.70"),
        (Decimal("0.864"), "$0.864"),  # exact: never rounded for display
        (Decimal("0.0025"), "$0.0025"),
        (Decimal("12000"), "$12,000.00"),
        (Decimal("-5"), "-$5.00"),
        (Decimal("1E+3"), "$1,000.00"),
        ("8.564", "$8.564"),  # the API's text form
        (0, "$0.00"),
        (None, "—"),
        ("", "—"),
    ],
)
def test_amounts(amount, shown):
    assert usd(amount) == shown


def test_every_template_has_it_without_a_load():
    assert Template("{{ fee|usd }} a month").render(Context({"fee": Decimal("299")})) == "$299.00 a month"


def test_hours_speak_the_usage_pages_unit():
    from foundation.templatetags.units import hours

    assert hours(7200) == "2.00" and hours(Decimal("5400")) == "1.50" and hours(360_000) == "100.00"
    assert hours(1_000_000_000) == "277,777.78" and hours("x") == ""


def test_the_api_form_and_the_page_form_agree_and_refuse_floats():
    assert format_amount(Decimal("8.5640")) == "8.564" and usd(Decimal("8.5640")) == "$8.564"
    assert format_amount(Decimal("12000")) == "12000.00" and usd(Decimal("12000")) == "$12,000.00"
    assert to_cents(Decimal("0.005")) == Decimal("0.01") and to_cents(Decimal("-0.005")) == Decimal("-0.01")
    with pytest.raises(TypeError):
        format_amount(0.1)
