"""`|usd`, `|unit_price` and `|quantity`: the one way pages print money (foundation/templatetags/money.py)."""

from decimal import Decimal

import pytest
from django.template import Context, Template

from foundation import money
from foundation.money import format_amount, to_cents
from foundation.templatetags.money import quantity, unit_price, usd


@pytest.mark.parametrize(
    "amount, shown",
    [
        (Decimal("299"), "$299.00"),  # SQLite hands back a whole price without its cents
        (Decimal("299.00"), "$299.00"),
        (Decimal("2.7"), "$2.70"),
        (Decimal("0.86"), "$0.86"),
        (Decimal("12000"), "$12,000.00"),
        (Decimal("-5"), "-$5.00"),
        (Decimal("1E+3"), "$1,000.00"),
        (0, "$0.00"),
        (None, "—"),
        ("", "—"),
    ],
)
def test_amounts(amount, shown):
    assert usd(amount) == shown


@pytest.mark.parametrize(
    "amount, shown, exact",
    [
        (Decimal("0.864"), "$0.86", "$0.864"),  # to the cent, as the invoice rounds it
        ("8.564", "$8.56", "$8.564"),  # the API's text form
        (Decimal("0.005"), "$0.01", "$0.005"),  # half-up
        (Decimal("0.001448624"), "< $0.01", "$0.001448624"),  # a few seconds of a GPU are not free
        (Decimal("-0.001"), "> -$0.01", "-$0.001"),
        (Decimal("1234.5678"), "$1,234.57", "$1,234.5678"),
    ],
)
def test_amounts_to_the_cent_with_the_exact_figure_on_hover(amount, shown, exact):
    assert money.usd(amount) == shown and money.usd_exact(amount) == exact
    html = str(usd(amount))
    assert f">{shown.replace('<', '&lt;').replace('>', '&gt;')}</span>" in html and f'title="{exact} exactly"' in html


def test_unit_prices_keep_their_places_and_their_currency():
    assert unit_price(Decimal("0.0025")) == "$0.0025" and unit_price(Decimal("299")) == "$299.00"


def test_quantities_to_sensible_places():
    assert quantity(Decimal("1800")) == "1,800" and quantity(Decimal("250.000")) == "250"
    shown = str(quantity(Decimal("0.838709677419")))
    assert ">0.839</span>" in shown and 'title="0.838709677419"' in shown
    assert quantity(Decimal("0.5")) == "0.5" and quantity(None) == "—"


def test_every_template_has_it_without_a_load():
    assert Template("{{ fee|usd }} a month").render(Context({"fee": Decimal("299")})) == "$299.00 a month"


def test_hours_speak_the_usage_pages_unit():
    from foundation.templatetags.units import hours

    assert hours(7200) == "2.00" and hours(Decimal("5400")) == "1.50" and hours(360_000) == "100.00"
    assert hours(1_000_000_000) == "277,777.78" and hours("x") == ""


def test_the_api_form_and_the_page_form_agree_and_refuse_floats():
    assert format_amount(Decimal("8.5640")) == "8.564" and money.usd_exact(Decimal("8.5640")) == "$8.564"
    assert format_amount(Decimal("12000")) == "12000.00" and usd(Decimal("12000")) == "$12,000.00"
    assert to_cents(Decimal("0.005")) == Decimal("0.01") and to_cents(Decimal("-0.005")) == Decimal("-0.01")
    with pytest.raises(TypeError):
        format_amount(0.1)
